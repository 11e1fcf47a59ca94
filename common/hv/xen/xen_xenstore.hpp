// LibXenStore: XenStore over libxenstore, talking to the real xenstored (through its unix
// socket in dom0, or /dev/xen/xenbus in a guest) or to any xenstored-compatible daemon at a
// given socket path (xensim's per-domain sockets).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/hv/watch_event_queue.hpp"
#include "common/hv/xenstore.hpp"

struct xs_handle;

namespace unetback::hv {

class LibXenStore final : public XenStore {
 public:
  /// Connects to xenstored. Without `socket_path`, libxenstore's own choice: the socket
  /// $XENSTORED_PATH, else $XENSTORED_RUNDIR/socket, else /var/run/xenstored/socket, then
  /// the xenbus device. With `socket_path`, that socket and nothing else.
  ///
  /// libxenstore 4.17 takes the socket path only from the environment variable
  /// XENSTORED_PATH, read during xs_open(); so this sets XENSTORED_PATH for the duration of
  /// xs_open() under a process-wide mutex and restores the previous value (or its absence)
  /// afterwards. Code that reads the environment concurrently on another thread without that
  /// mutex may observe the temporary value; open connections early, before such threads.
  ///
  /// Throws SetupError naming the path(s) tried when the connection fails.
  explicit LibXenStore(std::optional<std::string> socket_path = std::nullopt);
  /// Closes the connection (xenstored drops our watches and open transactions).
  ~LibXenStore() override;
  LibXenStore(const LibXenStore&) = delete;
  LibXenStore& operator=(const LibXenStore&) = delete;

  Result<std::string> read(std::string_view path, XsTx tx = {}) override;
  std::error_code write(std::string_view path, std::string_view value, XsTx tx = {}) override;
  std::error_code mkdir(std::string_view path, XsTx tx = {}) override;
  std::error_code rm(std::string_view path, XsTx tx = {}) override;
  Result<std::vector<std::string>> directory(std::string_view path, XsTx tx = {}) override;
  Result<std::vector<XsPerm>> get_perms(std::string_view path, XsTx tx = {}) override;
  std::error_code set_perms(std::string_view path, std::span<const XsPerm> perms,
                            XsTx tx = {}) override;

  Result<XsTx> transaction_start() override;
  std::error_code transaction_end(XsTx tx, bool commit) override;

  std::error_code watch(std::string_view path, std::string_view token) override;
  /// Also drops events of this watch still queued (libxenstore's XS_UNWATCH_FILTER), so no
  /// event arrives for a watch that is gone.
  std::error_code unwatch(std::string_view path, std::string_view token) override;
  /// A pipe libxenstore's reader thread makes readable while it holds events. read_watch()
  /// moves them into our own queue, so after a bounded read_watch() loop events may remain
  /// queued here with the pipe empty: call read_watch() until it returns nullopt.
  [[nodiscard]] int watch_fd() const override;
  /// libxenstore's reader thread queues every event it reads, without bound; this takes what
  /// it holds (at most kDrainBatch per call) into a WatchEventQueue, which merges an event
  /// into an identical pending one (XSA-349), and returns the oldest.
  std::optional<XsWatchEvent> read_watch() override;
  /// EPIPE once libxenstore closed the socket (xenstored went away or a reply was garbled).
  [[nodiscard]] std::error_code connection_error() const override { return lost_; }
  [[nodiscard]] std::size_t queued_watch_events() const { return queue_.size(); }

  static constexpr std::size_t kDrainBatch = 4096;

  Result<std::string> get_domain_path(DomId domid) override;

 private:
  struct Closer {
    void operator()(xs_handle* h) const noexcept;
  };
  void drain_library_queue();

  std::unique_ptr<xs_handle, Closer> handle_;
  int watch_fd_ = -1;
  WatchEventQueue queue_;
  std::error_code lost_;
};

/// Where libxenstore will look when no socket path is given, as a readable list for error
/// messages (it reads the same environment variables): "/var/run/xenstored/socket or
/// /dev/xen/xenbus" on an unconfigured host.
[[nodiscard]] std::string default_xenstore_locations();

}  // namespace unetback::hv
