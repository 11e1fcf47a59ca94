#include "tools/userhop/userhop_options.hpp"

#include "common/net/tap_device.hpp"
#include "common/util/arg_parser.hpp"
#include "common/util/parse_decimal.hpp"

namespace unetback::userhop {

std::string_view userhop_usage() {
  return R"(usage: unetback-userhop --a NAME --b NAME [--netns-a NS] [--netns-b NS]
                        [--mtu N] [--budget N] [--no-offloads]

The user-hop baseline of `tools/lab.sh bench`: two TAPs (IFF_VNET_HDR, checksum and TSO
offloads) joined by a plain poll/read/write loop, the least work any userspace backend does
per packet. Each frame read from one TAP, virtio_net_hdr included, is written unchanged to
the other, so a GSO super-frame crosses as one read and one write.

  --a NAME, --b NAME   the TAPs to create (they must not exist)
  --netns-a NS         create TAP a inside network namespace NS (/run/netns/NS)
  --netns-b NS         same for TAP b
  --mtu N              MTU of both TAPs (68..65535; default the kernel's 1500)
  --budget N           frames per direction per poll round (1..4096, default 64)
  --no-offloads        no checksum/TSO offloads (the vnet header stays)

Prints "userhop ready" when both TAPs are up; on SIGTERM or SIGINT prints its counters
and exits 0. Exit 1: setup failed; 2: bad command line.
)";
}

std::variant<UserhopOptions, HelpRequested, std::string> parse_userhop_options(
    std::span<const std::string_view> args) {
  static constexpr cli::OptionSpec kOptions[] = {
      cli::kHelp,         cli::flag("no-offloads"), cli::valued("a"),
      cli::valued("b"),   cli::valued("netns-a"),   cli::valued("netns-b"),
      cli::valued("mtu"), cli::valued("budget")};
  UserhopOptions o;
  cli::ArgParser parser(args, kOptions, {.positionals = false});
  while (const auto a = parser.next()) {
    const std::string_view v = a->value;
    const std::string opt = "--" + std::string(a->name);
    if (a->is("help")) return HelpRequested{};
    if (a->is("no-offloads")) {
      o.offloads = false;
    } else if (a->is("a") || a->is("b")) {
      if (!net::valid_ifname(v))
        return opt + ": '" + std::string(v) + "' is not a valid interface name";
      (a->is("a") ? o.tap_a : o.tap_b) = std::string(v);
    } else if (a->is("netns-a") || a->is("netns-b")) {
      // A name under /run/netns: no path tricks.
      if (v.empty() || v.find('/') != std::string_view::npos || v == "." || v == "..")
        return opt + ": '" + std::string(v) + "' is not a namespace name";
      (a->is("netns-a") ? o.netns_a : o.netns_b) = std::string(v);
    } else if (a->is("mtu")) {
      o.mtu = parse_decimal<std::uint32_t>(v, 68, 65535);
      if (!o.mtu) return "--mtu takes 68..65535";
    } else if (a->is("budget")) {
      auto b = parse_decimal<std::uint32_t>(v, 1, 4096);
      if (!b) return "--budget takes 1..4096";
      o.budget = *b;
    }
  }
  if (const auto& e = parser.error()) return e->message();
  if (o.tap_a.empty() || o.tap_b.empty()) return std::string("--a and --b are required");
  if (o.tap_a == o.tap_b && o.netns_a == o.netns_b)
    return std::string("--a and --b name the same TAP");
  return o;
}

}  // namespace unetback::userhop
