#include "common/hv/xen/xen_hypervisor.hpp"

#include <atomic>
#include <cerrno>
#include <mutex>
#include <optional>
#include <string>

#include "common/hv/xen/xen_domain_info.hpp"
#include "common/hv/xen/xen_event_channel.hpp"
#include "common/hv/xen/xen_grant_sharer.hpp"
#include "common/hv/xen/xen_grant_table.hpp"
#include "common/hv/xen/xen_xenstore.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

constexpr const char* kXenLog = "xen";

/// Our own domid, as `xenstore-read domid` finds it: xenstored resolves the relative path
/// against the caller's /local/domain/<id>, where the toolstack wrote "domid".
Result<DomId> read_own_domid() {
  try {
    LibXenStore xs;
    auto value = xs.read("domid");
    if (!value) return value.error();
    auto id = parse_domid(*value);
    if (!id) return std::errc::invalid_argument;
    return *id;
  } catch (const SetupError& e) {
    log::write(log::Level::debug, kXenLog, e.what());
    return std::errc::no_such_device;
  }
}

class XenHypervisor final : public Hypervisor {
 public:
  explicit XenHypervisor(const HypervisorOptions& opts)
      : role_(opts.role), copy_batch_(opts.copy_batch) {
    if (role_ == Role::backend) {
      table_ = std::make_unique<XenGrantTable>(opts.copy_batch);
    } else {
      sharer_ = std::make_unique<XenGrantSharer>();
    }
    auto id = read_own_domid();
    if (id) {
      self_ = *id;
    } else if (role_ == Role::backend) {
      // A backend normally runs in dom0, where the toolstack may not have written "domid"
      // yet (or xenstored is still starting); a driver domain always has it.
      log::write(
          log::Level::warn, kXenLog,
          "cannot read our domid from xenstore (" + id.error().message() + "): assuming dom0");
      self_ = kDom0;
    } else {
      throw SetupError("xen: cannot read our domid from xenstore: " + id.error().message());
    }
  }

  [[nodiscard]] DomId self() const override { return self_; }

  GrantTable& grant_table() override {
    if (!table_) {
      throw SetupError(
          "xen: this hypervisor handle was opened for the frontend role and has "
          "no grant table (open it with Role::backend)");
    }
    return *table_;
  }

  std::unique_ptr<GrantTable> open_grant_table() override {
    (void)grant_table();  // same role check and message
    return std::make_unique<XenGrantTable>(copy_batch_);
  }

  GrantSharer& grant_sharer() override {
    if (!sharer_) {
      throw SetupError(
          "xen: this hypervisor handle was opened for the backend role and has "
          "no grant sharer (open it with Role::frontend)");
    }
    return *sharer_;
  }

  std::unique_ptr<EventChannel> open_event_channel() override {
    auto ch = std::make_unique<XenEventChannel>();
    if (serves_) {
      if (auto ec = ch->restrict_to(*serves_)) {
        throw SetupError("event channel: cannot restrict /dev/xen/evtchn to domain " +
                             std::to_string(serves_->value()) + ": " + ec.message(),
                         ec);
      }
    }
    opened_event_channels_ = true;
    return ch;
  }

  std::unique_ptr<XenStore> open_xenstore() override { return std::make_unique<LibXenStore>(); }

  bool domain_exists(DomId domid) override {
    if (serves_) return domid == *serves_;
    if (is_reserved(domid)) return false;
    if (auto known = info_.exists(domid)) return *known;
    return exists_in_xenstore(domid);
  }

 private:
  /// Without privcmd (or the privilege for the domctl): the toolstack creates
  /// /local/domain/<id> with the domain and removes it on destroy. When even that cannot
  /// be asked, the domain is assumed to exist: tearing down a live guest's vif is worse
  /// than keeping a dead one's a little longer.
  bool exists_in_xenstore(DomId domid) {
    const std::lock_guard lock(xs_mutex_);
    if (!xs_) {
      try {
        xs_ = std::make_unique<LibXenStore>();
      } catch (const SetupError& e) {
        log::write(log::Level::warn, kXenLog, std::string("domain liveness unknown: ") + e.what());
        return true;
      }
    }
    auto entries = xs_->directory("/local/domain/" + std::to_string(domid.value()));
    if (entries) return true;
    return entries.error() != std::errc::no_such_file_or_directory;
  }

 public:
  std::error_code restrict_to_domain(DomId serve) override {
    if (serve == kDom0 || is_reserved(serve)) return errno_code(EINVAL);
    if (serves_) return errno_code(EACCES);
    if (opened_event_channels_) return errno_code(EBUSY);
    serves_ = serve;
    info_.close();
    const std::lock_guard lock(xs_mutex_);
    xs_.reset();
    return {};
  }

 private:
  Role role_;
  std::size_t copy_batch_;
  std::unique_ptr<XenGrantTable> table_;
  std::unique_ptr<XenGrantSharer> sharer_;
  DomId self_{};
  XenDomainInfo info_;
  std::mutex xs_mutex_;
  std::unique_ptr<XenStore> xs_;
  std::optional<DomId> serves_;  // restrict_to_domain()
  std::atomic<bool> opened_event_channels_ = false;
};

}  // namespace

std::unique_ptr<Hypervisor> open_xen_hypervisor(const HypervisorOptions& opts) {
  return std::make_unique<XenHypervisor>(opts);
}

}  // namespace unetback::hv
