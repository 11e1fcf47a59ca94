#include "tools/xl/devd.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <map>
#include <poll.h>
#include <set>
#include <utility>
#include <vector>

#include "common/hotplug/hotplug_script.hpp"
#include "common/hv/xen/xen_xenstore.hpp"
#include "tools/xl/world.hpp"

namespace unetback::xl {
namespace {

namespace hp = hotplug;

/// The watch loop of `xl devd` (devd.hpp): each wake-up rescans the backend dirs and brings
/// each vif online or offline as its state says.
class Devd {
 public:
  Devd(const std::string& world, DomId self)
      : self_(self),
        sock_(xs_socket(world, self)),
        root_("/local/domain/" + num(self.value()) + "/backend/vif"),
        xs_(sock_) {}

  int run() {
    auto watch = hv::XsWatch::add(xs_, root_, "devd");
    if (!watch) {
      err("devd: cannot watch " + root_ + ": " + watch.error().message());
      return kExitError;
    }
    std::cerr << "unetback-xl devd: serving the hotplug scripts of " << root_ << "\n";
    while (stop_requested == 0) {
      while (xs_.read_watch()) {
      }
      if (auto ec = xs_.connection_error()) {
        // The domain was destroyed (its xenstore connection with it), as xl devd dies with
        // its domain.
        std::cerr << "unetback-xl devd: xenstore connection gone (" << ec.message()
                  << "): exiting\n";
        return kExitOk;
      }
      scan();
      pollfd pfd{xs_.watch_fd(), POLLIN, 0};
      (void)::poll(&pfd, 1, 200);
    }
    return kExitOk;
  }

  static inline volatile std::sig_atomic_t stop_requested = 0;

 private:
  struct Online {
    std::string script, netdev;
  };
  using Key = std::pair<std::uint16_t, std::uint32_t>;  // frontend domid, devid

  std::string read_or(const std::string& path, const std::string& fallback) {
    return xl::read_or(xs_, path, fallback);
  }
  std::string be_path(const Key& k) const {
    return root_ + "/" + num(k.first) + "/" + num(k.second);
  }

  /// The vifs under root_ now: frontend domid and devid of each backend dir.
  std::vector<Key> present_vifs() {
    std::vector<Key> present;
    if (auto fronts = xs_.directory(root_)) {
      for (const auto& f : *fronts) {
        auto fd = parse_uint(f, 0xfffe);
        if (!fd) continue;
        if (auto devs = xs_.directory(root_ + "/" + f)) {
          for (const auto& d : *devs) {
            if (auto dv = parse_uint(d, 0xffff))
              present.emplace_back(static_cast<std::uint16_t>(*fd), *dv);
          }
        }
      }
    }
    return present;
  }

  void scan() {
    const std::vector<Key> present = present_vifs();
    for (const Key& k : present) {
      const std::string be = be_path(k);
      const std::string state = read_or(be + "/state", "");
      const std::string online = read_or(be + "/online", "");
      if (!online_.contains(k) && !failed_.contains(k) && state == "2" && online == "1" &&
          read_or(be + "/hotplug-status", "x").empty()) {
        bring_online(k);
      } else if (online_.contains(k) && online == "0" && state == "6") {
        take_offline(k);
      }
    }
    // A vif whose dir went before we saw it Closed (dom0 removed it): offline all the same.
    std::vector<Key> gone;
    for (const auto& [k, o] : online_)
      if (std::find(present.begin(), present.end(), k) == present.end()) gone.push_back(k);
    for (const Key& k : gone) take_offline(k);
    std::erase_if(failed_, [&](const Key& k) {
      return std::find(present.begin(), present.end(), k) == present.end();
    });
  }

  hp::HotplugCall call(const Key& k, const Online& o, std::string action) const {
    return hp::HotplugCall{o.script,        std::move(action), DomId{k.first},
                           DevId{k.second}, o.netdev,          sock_};
  }

  void bring_online(const Key& k) {
    const std::string be = be_path(k);
    Online o{read_or(be + "/script", ""), read_or(be + "/gatewaydev", "")};
    if (o.script.empty()) {
      failed_.insert(k);
      (void)xs_.write(be + "/hotplug-error", "no script");
      (void)xs_.write(be + "/hotplug-status", "error");
      return;
    }
    const auto why =
        script_failure(hp::run_hotplug_script(call(k, o, "online"), hp::kHotplugTimeout));
    if (why) {
      err("devd: hotplug script " + o.script + " online for " + be + " " + *why);
      failed_.insert(k);
      // The script writes its own error on failure; one that could not even run cannot.
      if (read_or(be + "/hotplug-status", "").empty()) {
        (void)xs_.write(be + "/hotplug-error", o.script + " " + *why);
        (void)xs_.write(be + "/hotplug-status", "error");
      }
      return;
    }
    std::cerr << "unetback-xl devd: " << o.script << " online for " << be << "\n";
    online_.emplace(k, std::move(o));
  }

  void take_offline(const Key& k) {
    const std::string be = be_path(k);
    const Online o = online_.at(k);
    online_.erase(k);
    if (const auto why =
            script_failure(hp::run_hotplug_script(call(k, o, "offline"), hp::kHotplugTimeout))) {
      err("devd: hotplug script " + o.script + " offline for " + be + " " + *why);
    } else {
      std::cerr << "unetback-xl devd: " << o.script << " offline for " << be << "\n";
    }
    (void)xs_.rm(be);
    const std::string parent = root_ + "/" + num(k.first);
    rm_if_empty(xs_, parent);
  }

  DomId self_;
  std::string sock_, root_;
  hv::LibXenStore xs_;
  std::map<Key, Online> online_;
  std::set<Key> failed_;
};

}  // namespace

int cmd_devd(const std::string& dir, const std::string& target) {
  DomId self{};
  {
    World w(dir);  // dom0's view, to find the domain
    const auto d = running_domain(w, target);
    if (!d) return kExitError;
    self = *d;
  }
  std::signal(SIGTERM, [](int) { Devd::stop_requested = 1; });
  std::signal(SIGINT, [](int) { Devd::stop_requested = 1; });
  Devd devd(dir, self);
  return devd.run();
}

}  // namespace unetback::xl
