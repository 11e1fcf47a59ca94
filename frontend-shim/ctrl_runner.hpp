// CtrlRunner: runs a sequence of control-ring requests (CtrlClient steps) inside a
// Boost.Asio loop, one request at a time as win-xenvif does, without ever blocking it. Each
// request is put on the ring and the backend notified; its answer is taken when the control
// channel's fd turns readable (an async_wait, as the data path's event channels are waited
// for), or the request is given up when a steady_timer expires first. The next step goes
// out from the answer's completion handler; the sequence ends in one call of `done`.
#pragma once

// clang-format off
#include <utility>  // before Boost.Asio (environment.md)
#include <boost/asio.hpp>
// clang-format on
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <system_error>
#include <vector>

#include "frontend-shim/ctrl_client.hpp"

namespace unetback::shim {

class CtrlRunner {
 public:
  /// {} once every step was answered SUCCESS; else the first failure: timed_out (no answer
  /// within the timeout), protocol_error, or invalid_argument (the backend refused a step).
  using Done = std::function<void(std::error_code)>;

  explicit CtrlRunner(boost::asio::any_io_executor ex);
  ~CtrlRunner();
  CtrlRunner(const CtrlRunner&) = delete;
  CtrlRunner& operator=(const CtrlRunner&) = delete;

  /// Starts `steps` on `client` (which must outlive the sequence, or cancel() first).
  /// `done` is called from the loop, never from start() itself; every failure is logged
  /// with the step's name. device_or_resource_busy (and nothing started) while another
  /// sequence runs.
  std::error_code start(netfront::CtrlClient& client, std::vector<netfront::CtrlStep> steps,
                        Done done, std::chrono::milliseconds timeout = netfront::kCtrlTimeout);
  /// Ends a running sequence without calling `done` (the request in flight is abandoned),
  /// and lets go of the client's fd. Before the client goes away.
  void cancel();
  [[nodiscard]] bool busy() const { return client_ != nullptr; }

 private:
  void send_current();
  void check();
  void arm_event();
  void finish(std::error_code ec);

  boost::asio::any_io_executor ex_;
  std::optional<boost::asio::posix::stream_descriptor> desc_;  ///< the client's fd, not owned
  boost::asio::steady_timer deadline_;
  netfront::CtrlClient* client_ = nullptr;  ///< while a sequence runs
  std::vector<netfront::CtrlStep> steps_;
  std::size_t current_ = 0;
  std::chrono::milliseconds timeout_{};
  Done done_;
  std::uint64_t serial_ = 0;   ///< bumped at every end: stale handlers do nothing
  std::uint64_t request_ = 0;  ///< bumped at every send: a stale deadline does nothing
  bool waiting_ = false;       ///< an async_wait on desc_ is outstanding
};

}  // namespace unetback::shim
