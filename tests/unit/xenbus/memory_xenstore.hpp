// MemoryXenStore: a small, real, single-process hv::XenStore for unit tests (a fake of the
// store, not a mock): a tree of nodes, parents created on write, rm of a subtree, watches that
// fire once on registration and then for every change of the node, a descendant or (on rm) an
// ancestor, transactions that apply at once (commits can be made to fail with EAGAIN to
// exercise retries). Permissions are stored, not enforced. Every write/rm is appended to an
// optional journal so tests can assert the order of side effects.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/hv/xenstore.hpp"

namespace unetback::testing {

class MemoryXenStore final : public hv::XenStore {
 public:
  Result<std::string> read(std::string_view path, hv::XsTx tx = {}) override;
  std::error_code write(std::string_view path, std::string_view value, hv::XsTx tx = {}) override;
  std::error_code mkdir(std::string_view path, hv::XsTx tx = {}) override;
  std::error_code rm(std::string_view path, hv::XsTx tx = {}) override;
  Result<std::vector<std::string>> directory(std::string_view path, hv::XsTx tx = {}) override;
  Result<std::vector<hv::XsPerm>> get_perms(std::string_view path, hv::XsTx tx = {}) override;
  std::error_code set_perms(std::string_view path, std::span<const hv::XsPerm> perms,
                            hv::XsTx tx = {}) override;
  Result<hv::XsTx> transaction_start() override;
  std::error_code transaction_end(hv::XsTx tx, bool commit) override;
  std::error_code watch(std::string_view path, std::string_view token) override;
  std::error_code unwatch(std::string_view path, std::string_view token) override;
  [[nodiscard]] int watch_fd() const override { return -1; }
  std::optional<hv::XsWatchEvent> read_watch() override;
  Result<std::string> get_domain_path(DomId domid) override;

  /// The next `n` commits fail with EAGAIN.
  void fail_next_commits(int n) { failing_commits_ = n; }
  /// Every write ("write <path>=<value>") and rm ("rm <path>") is appended here.
  void set_journal(std::vector<std::string>* journal) { journal_ = journal; }

  [[nodiscard]] bool exists(std::string_view path) const;
  [[nodiscard]] std::size_t watch_count() const { return watches_.size(); }
  [[nodiscard]] std::size_t commits() const { return commits_; }
  /// The connection that registered every watch closed (its daemon is gone): none is left.
  void forget_watches() {
    watches_.clear();
    events_.clear();
  }
  /// read() calls so far: each is a round trip to a real xenstored.
  [[nodiscard]] std::size_t reads() const { return reads_; }

 private:
  struct Watch {
    std::string path, token;
  };
  void create_parents(const std::string& path);
  void fire(const std::string& path, bool removal);

  std::map<std::string, std::string> nodes_{{"/", ""}};
  std::map<std::string, std::vector<hv::XsPerm>> perms_;
  std::vector<Watch> watches_;
  std::deque<hv::XsWatchEvent> events_;
  std::vector<std::string>* journal_ = nullptr;
  std::uint32_t next_tx_ = 1;
  std::vector<std::uint32_t> open_tx_;
  int failing_commits_ = 0;
  std::size_t commits_ = 0;
  std::size_t reads_ = 0;
};

}  // namespace unetback::testing
