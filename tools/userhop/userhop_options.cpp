#include "tools/userhop/userhop_options.hpp"

#include <charconv>

#include "common/net/tap_device.hpp"
#include "common/util/parse_decimal.hpp"

namespace unetback::userhop {
namespace {}  // namespace

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
  UserhopOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") return HelpRequested{};
    if (a == "--no-offloads") {
      o.offloads = false;
      continue;
    }
    if (i + 1 >= args.size()) return std::string(a) + " needs a value";
    const std::string_view v = args[++i];
    if (a == "--a" || a == "--b") {
      if (!net::valid_ifname(v))
        return std::string(a) + ": '" + std::string(v) + "' is not a valid interface name";
      (a == "--a" ? o.tap_a : o.tap_b) = std::string(v);
    } else if (a == "--netns-a" || a == "--netns-b") {
      // A name under /run/netns: no path tricks.
      if (v.empty() || v.find('/') != std::string_view::npos || v == "." || v == "..")
        return std::string(a) + ": '" + std::string(v) + "' is not a namespace name";
      (a == "--netns-a" ? o.netns_a : o.netns_b) = std::string(v);
    } else if (a == "--mtu") {
      o.mtu = parse_decimal<std::uint32_t>(v, 68, 65535);
      if (!o.mtu) return "--mtu takes 68..65535";
    } else if (a == "--budget") {
      auto b = parse_decimal<std::uint32_t>(v, 1, 4096);
      if (!b) return "--budget takes 1..4096";
      o.budget = *b;
    } else {
      return "unknown option " + std::string(a);
    }
  }
  if (o.tap_a.empty() || o.tap_b.empty()) return std::string("--a and --b are required");
  if (o.tap_a == o.tap_b && o.netns_a == o.netns_b)
    return std::string("--a and --b name the same TAP");
  return o;
}

}  // namespace unetback::userhop
