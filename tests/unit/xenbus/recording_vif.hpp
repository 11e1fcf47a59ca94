// RecordingVif: a VifControl for tests. It keeps the state a real vif would have (TAP present,
// rings connected), appends each call to the journal the MemoryXenStore shares, and can be told
// to fail create_tap or connect.
#pragma once

#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "backend/xenbus/xenbus_adapter.hpp"

namespace unetback::testing {

class RecordingVif final : public xenbus::VifControl {
 public:
  explicit RecordingVif(std::vector<std::string>& journal) : journal_(journal) {}

  std::error_code create_tap(const xenbus::BackendConfig& be) override {
    journal_.push_back("create_tap " + be.tap_name);
    if (create_tap_error) return create_tap_error;
    tap = be.tap_name;
    return {};
  }
  void destroy_tap() override {
    journal_.push_back("destroy_tap");
    tap.reset();
  }
  std::error_code connect(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig&,
                          const xenbus::Rate& r) override {
    journal_.push_back("connect " + std::to_string(fe.queues.size()));
    ++connect_calls;
    if (connect_error) return connect_error;
    connected = fe;
    rate = r;
    return {};
  }
  std::error_code adopt(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig&,
                        const xenbus::Rate& r) override {
    journal_.push_back("adopt " + std::to_string(fe.queues.size()));
    if (adopt_error) return adopt_error;
    connected = fe;
    rate = r;
    return {};
  }
  void remember_keys(const xenbus::KeySnapshot& keys) override { remembered = keys; }
  std::optional<xenbus::KeySnapshot> handed_over_keys() override { return handed_over; }
  void disconnect() override {
    journal_.push_back("disconnect");
    connected.reset();
  }
  void rate_changed(const xenbus::Rate& r) override {
    journal_.push_back("rate_changed");
    rate = r;
  }
  void multicast_control_changed(bool enabled) override {
    journal_.push_back(enabled ? "multicast_control 1" : "multicast_control 0");
    multicast_control = enabled;
  }
  void mac_spoofing_changed(bool allowed) override {
    journal_.push_back(allowed ? "mac_spoofing 1" : "mac_spoofing 0");
    mac_spoofing = allowed;
  }
  void xdp_headroom_changed(std::uint32_t headroom) override {
    journal_.push_back("xdp_headroom " + std::to_string(headroom));
    xdp_headroom = headroom;
  }

  std::error_code create_tap_error;
  std::error_code connect_error;
  /// Like a vif without a state record, unless a test says otherwise.
  std::error_code adopt_error = std::make_error_code(std::errc::operation_not_supported);
  xenbus::KeySnapshot remembered;                  // the last remember_keys()
  std::optional<xenbus::KeySnapshot> handed_over;  // what handed_over_keys() answers
  std::optional<std::string> tap;
  std::optional<xenbus::FrontendConfig> connected;
  std::optional<xenbus::Rate> rate;
  std::optional<bool> multicast_control;
  std::optional<bool> mac_spoofing;
  std::optional<std::uint32_t> xdp_headroom;
  int connect_calls = 0;

 private:
  std::vector<std::string>& journal_;
};

}  // namespace unetback::testing
