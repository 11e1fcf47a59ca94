// SpecialWatchXenStore: MemoryXenStore plus xenstored's special watch paths (@releaseDomain,
// @introduceDomain), which MemoryXenStore refuses as invalid paths. Everything else is passed
// through; fire_special() queues an event as xenstored does when a domain dies.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "tests/unit/xenbus/memory_xenstore.hpp"

namespace unetback::testing {

class SpecialWatchXenStore final : public hv::XenStore {
 public:
  Result<std::string> read(std::string_view p, hv::XsTx tx = {}) override {
    if (fail_reads) return fail_reads;
    return m.read(p, tx);
  }
  std::error_code write(std::string_view p, std::string_view v, hv::XsTx tx = {}) override {
    return m.write(p, v, tx);
  }
  std::error_code mkdir(std::string_view p, hv::XsTx tx = {}) override { return m.mkdir(p, tx); }
  std::error_code rm(std::string_view p, hv::XsTx tx = {}) override { return m.rm(p, tx); }
  Result<std::vector<std::string>> directory(std::string_view p, hv::XsTx tx = {}) override {
    if (fail_directories) return fail_directories;
    return m.directory(p, tx);
  }
  Result<std::vector<hv::XsPerm>> get_perms(std::string_view p, hv::XsTx tx = {}) override {
    return m.get_perms(p, tx);
  }
  std::error_code set_perms(std::string_view p, std::span<const hv::XsPerm> perms,
                            hv::XsTx tx = {}) override {
    return m.set_perms(p, perms, tx);
  }
  Result<hv::XsTx> transaction_start() override { return m.transaction_start(); }
  std::error_code transaction_end(hv::XsTx tx, bool commit) override {
    return m.transaction_end(tx, commit);
  }
  std::error_code watch(std::string_view p, std::string_view token) override {
    if (!p.starts_with("@")) return m.watch(p, token);
    special_.push_back({std::string(p), std::string(token)});
    queued_.push_back({std::string(p), std::string(token)});  // the initial event
    return {};
  }
  std::error_code unwatch(std::string_view p, std::string_view token) override {
    if (!p.starts_with("@")) return m.unwatch(p, token);
    std::erase_if(special_,
                  [&](const hv::XsWatchEvent& w) { return w.path == p && w.token == token; });
    std::erase_if(queued_,
                  [&](const hv::XsWatchEvent& w) { return w.path == p && w.token == token; });
    return {};
  }
  [[nodiscard]] int watch_fd() const override { return -1; }
  std::optional<hv::XsWatchEvent> read_watch() override {
    if (!queued_.empty()) {
      auto e = std::move(queued_.front());
      queued_.pop_front();
      return e;
    }
    return m.read_watch();
  }
  Result<std::string> get_domain_path(DomId d) override { return m.get_domain_path(d); }

  /// What xenstored does when a domain is released.
  void fire_special(const std::string& path) {
    for (const auto& w : special_)
      if (w.path == path) queued_.push_back(w);
  }
  [[nodiscard]] std::size_t special_watches() const { return special_.size(); }

  MemoryXenStore m;
  /// Set: every read() / directory() fails with it (a xenstored that answers errors).
  std::error_code fail_reads;
  std::error_code fail_directories;

 private:
  std::vector<hv::XsWatchEvent> special_;
  std::deque<hv::XsWatchEvent> queued_;
};

}  // namespace unetback::testing
