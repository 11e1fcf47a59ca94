#include "tools/xl/toolstack.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <poll.h>
#include <random>
#include <vector>

namespace unetback::toolstack {
namespace {

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

std::error_code write_all(hv::XenStore& xs, hv::XsTx tx, const std::string& dir,
                          const std::vector<std::pair<std::string, std::string>>& kv) {
  for (const auto& [k, v] : kv) {
    std::string path = dir;
    path += '/';
    path += k;
    if (auto ec = xs.write(path, v, tx)) return ec;
  }
  return {};
}

}  // namespace

std::string backend_path(DomId backend, DomId frontend, DevId devid) {
  return "/local/domain/" + num(backend.value()) + "/backend/vif/" + num(frontend.value()) + "/" +
         num(devid.value());
}

std::string frontend_path(DomId frontend, DevId devid) {
  return "/local/domain/" + num(frontend.value()) + "/device/vif/" + num(devid.value());
}

std::string generate_uuid() {
  std::array<unsigned char, 16> b{};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(b.data()), b.size())) {
    std::random_device rd;
    for (auto& c : b) c = static_cast<unsigned char>(rd());
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof text,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return text;
}

std::error_code add_vm_nodes(hv::XenStore& xs, DomId domid, const std::string& name,
                             const std::string& uuid) {
  const std::string vm = "/vm/" + uuid;
  // libxl's roperm: owner dom0, the guest may read.
  const hv::XsPerm roperm[] = {{DomId{0}, hv::XsPerm::Kind::none}, {domid, hv::XsPerm::Kind::read}};
  return hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
    (void)xs.rm(vm, tx);
    if (auto ec = xs.mkdir(vm, tx)) return ec;
    if (auto ec = xs.set_perms(vm, roperm, tx)) return ec;
    if (auto ec = xs.write("/local/domain/" + num(domid.value()) + "/vm", vm, tx)) return ec;
    if (auto ec = xs.write(vm + "/uuid", uuid, tx)) return ec;
    return xs.write(vm + "/name", name, tx);
  });
}

void remove_vm_nodes(hv::XenStore& xs, DomId domid) {
  const auto vm = xs.read("/local/domain/" + num(domid.value()) + "/vm");
  // Only ever a /vm/<uuid> directory, whatever the node says.
  if (!vm || !vm->starts_with("/vm/") || vm->size() <= 4 || vm->find('/', 4) != std::string::npos)
    return;
  (void)xs.rm(*vm);
}

std::error_code add_control_nodes(hv::XenStore& xs, DomId domid) {
  const std::string control = "/local/domain/" + num(domid.value()) + "/control";
  const hv::XsPerm owner[] = {{domid, hv::XsPerm::Kind::none}};
  const hv::XsPerm ro[] = {{DomId{0}, hv::XsPerm::Kind::none}, {domid, hv::XsPerm::Kind::read}};
  return hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
    if (auto ec = xs.mkdir(control, tx)) return ec;
    if (auto ec = xs.set_perms(control, ro, tx)) return ec;
    if (auto ec = xs.write(control + "/shutdown", "", tx)) return ec;
    return xs.set_perms(control + "/shutdown", owner, tx);
  });
}

std::optional<VifSpec> read_vif_spec(hv::XenStore& xs, DomId frontend, DevId devid) {
  const std::string priv = "/libxl/" + num(frontend.value()) + "/device/vif/" + num(devid.value());
  auto read = [&](const char* key) -> std::optional<std::string> {
    auto v = xs.read(priv + "/" + key);
    if (!v) return std::nullopt;
    return std::move(*v);
  };
  auto mac = read("mac");
  if (!mac) return std::nullopt;
  VifSpec spec;
  spec.devid = devid;
  spec.mac = *mac;
  if (auto id = read("backend-id")) {
    if (auto v = hv::parse_xs_uint<std::uint16_t>(*id)) spec.backend_id = DomId{*v};
  }
  spec.backend = std::to_string(spec.backend_id.value());
  spec.script = read("script").value_or("");
  spec.bridge = read("bridge").value_or("");
  spec.vifname = read("vifname");
  spec.ip = read("ip");
  spec.gatewaydev = read("gatewaydev");
  spec.rate = read("rate");
  if (auto mtu = read("mtu")) spec.mtu = hv::parse_xs_uint<std::uint32_t>(*mtu);
  auto trusted = xs.read(frontend_path(frontend, devid) + "/trusted");
  spec.trusted = !trusted || *trusted != "0";
  return spec;
}

std::error_code add_vif(hv::XenStore& xs, DomId backend, DomId frontend, const VifSpec& spec) {
  const std::string be = backend_path(backend, frontend, spec.devid);
  const std::string fe = frontend_path(frontend, spec.devid);
  const std::string priv =
      "/libxl/" + num(frontend.value()) + "/device/vif/" + num(spec.devid.value());

  std::vector<std::pair<std::string, std::string>> be_keys = {
      {"frontend", fe},
      {"frontend-id", num(frontend.value())},
      {"online", "1"},
      {"state", "1"},
      {"script", spec.script},
      {"mac", spec.mac},
      {"handle", num(spec.devid.value())},
      {"type", "vif"},
      // "force backend to wait for hotplug script execution before switching to connected"
      {"hotplug-status", ""},
  };
  if (!spec.bridge.empty()) be_keys.emplace_back("bridge", spec.bridge);
  if (spec.vifname) be_keys.emplace_back("vifname", *spec.vifname);
  if (spec.ip) be_keys.emplace_back("ip", *spec.ip);
  if (spec.gatewaydev) be_keys.emplace_back("gatewaydev", *spec.gatewaydev);
  if (spec.rate) be_keys.emplace_back("rate", *spec.rate);
  if (spec.mtu) be_keys.emplace_back("mtu", num(*spec.mtu));
  const std::vector<std::pair<std::string, std::string>> fe_keys = {
      {"backend", be},   {"backend-id", num(backend.value())},
      {"state", "1"},    {"handle", num(spec.devid.value())},
      {"mac", spec.mac}, {"trusted", spec.trusted ? "1" : "0"},
  };
  const std::string mtu = num(spec.mtu.value_or(1500));

  const hv::XsPerm be_perms[] = {{backend, hv::XsPerm::Kind::none},
                                 {frontend, hv::XsPerm::Kind::read}};
  const hv::XsPerm fe_perms[] = {{frontend, hv::XsPerm::Kind::none},
                                 {backend, hv::XsPerm::Kind::read}};
  const hv::XsPerm ro_perms[] = {{backend, hv::XsPerm::Kind::none},
                                 {frontend, hv::XsPerm::Kind::read}};
  return hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
    if (auto ec = xs.mkdir(be, tx)) return ec;
    if (auto ec = xs.set_perms(be, be_perms, tx)) return ec;
    if (auto ec = xs.mkdir(fe, tx)) return ec;
    if (auto ec = xs.set_perms(fe, fe_perms, tx)) return ec;
    if (auto ec = write_all(xs, tx, be, be_keys)) return ec;
    if (auto ec = write_all(xs, tx, fe, fe_keys)) return ec;
    if (auto ec = xs.write(fe + "/mtu", mtu, tx)) return ec;
    if (auto ec = xs.set_perms(fe + "/mtu", ro_perms, tx)) return ec;
    if (auto ec = write_all(xs, tx, priv, be_keys)) return ec;
    return xs.write(priv + "/backend-id", num(backend.value()), tx);
  });
}

std::error_code wait_for_value(hv::XenStore& xs, const std::string& path, std::string_view value,
                               std::chrono::milliseconds timeout) {
  const std::string token = "toolstack-wait:" + path;
  auto watch = hv::XsWatch::add(xs, path, token);
  if (!watch) return watch.error();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto v = xs.read(path);
    if (v && *v == value) return {};
    // Drain queued events (ours and anyone else's on this connection: the caller owns it).
    while (xs.read_watch()) {
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::make_error_code(std::errc::timed_out);
    pollfd pfd{xs.watch_fd(), POLLIN, 0};
    (void)::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 100)));
  }
}

std::error_code close_vif(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid) {
  const std::string be = backend_path(backend, frontend, devid);
  auto state = xs.read(be + "/state");
  if (!state || *state == "6") return {};
  if (auto ec = hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
        if (auto e = xs.write(be + "/online", "0", tx)) return e;
        return xs.write(be + "/state", "5", tx);
      }))
    return ec;
  return wait_for_value(xs, be + "/state", "6", kDestroyTimeout);
}

void delete_vif_nodes(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid) {
  // libxl removes the frontend dir first (with force).
  (void)xs.rm(frontend_path(frontend, devid));
  (void)xs.rm(backend_path(backend, frontend, devid));
  (void)xs.rm("/libxl/" + num(frontend.value()) + "/device/vif/" + num(devid.value()));
}

std::error_code remove_vif(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid) {
  const std::error_code wait_error = close_vif(xs, backend, frontend, devid);
  // Even after a timeout, as libxl does. (A failed write is not a timeout: keep the nodes.)
  if (wait_error && wait_error != std::errc::timed_out) return wait_error;
  delete_vif_nodes(xs, backend, frontend, devid);
  return wait_error;
}

}  // namespace unetback::toolstack
