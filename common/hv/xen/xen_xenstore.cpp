#include "common/hv/xen/xen_xenstore.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>

extern "C" {
#include <xenstore.h>
}

#include "common/hv/xen/xen_open_error.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

constexpr const char* kPathVar = "XENSTORED_PATH";

/// Serialises every xs_open of this process against our temporary XENSTORED_PATH.
std::mutex& environment_mutex() {
  static std::mutex m;
  return m;
}

/// libxenstore returns malloc()ed memory the caller must free().
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <typename T>
using Malloced = std::unique_ptr<T, FreeDeleter>;

std::error_code status_of(bool ok) {
  return ok ? std::error_code{} : library_call_error();
}

/// libxenstore takes C strings: a path or token with an embedded NUL would silently be cut
/// short, so it is refused instead.
bool has_nul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

XsPerm::Kind kind_of(unsigned bits) {
  const bool r = (bits & XS_PERM_READ) != 0;
  const bool w = (bits & XS_PERM_WRITE) != 0;
  if (r && w) return XsPerm::Kind::both;
  if (r) return XsPerm::Kind::read;
  if (w) return XsPerm::Kind::write;
  return XsPerm::Kind::none;
}

unsigned bits_of(XsPerm::Kind kind) {
  switch (kind) {
    case XsPerm::Kind::none: return XS_PERM_NONE;
    case XsPerm::Kind::read: return XS_PERM_READ;
    case XsPerm::Kind::write: return XS_PERM_WRITE;
    case XsPerm::Kind::both: return XS_PERM_READ | XS_PERM_WRITE;
  }
  return XS_PERM_NONE;
}

/// xs_open() with XENSTORED_PATH temporarily set to `socket_path` (when given).
/// XS_UNWATCH_FILTER: xs_unwatch() also drops queued events of the removed watch.
// NOLINTBEGIN(concurrency-mt-unsafe): every environment access below holds environment_mutex().
xs_handle* open_handle(const std::optional<std::string>& socket_path, int& err) {
  const std::lock_guard lock(environment_mutex());
  if (!socket_path) {
    errno = 0;
    xs_handle* h = xs_open(XS_UNWATCH_FILTER);
    err = errno;
    return h;
  }
  std::optional<std::string> saved;
  if (const char* old = std::getenv(kPathVar)) saved = old;
  if (::setenv(kPathVar, socket_path->c_str(), 1) != 0) {
    err = errno;
    return nullptr;
  }
  errno = 0;
  xs_handle* h = xs_open(XS_UNWATCH_FILTER);
  err = errno;
  if (saved) {
    (void)::setenv(kPathVar, saved->c_str(), 1);
  } else {
    (void)::unsetenv(kPathVar);
  }
  return h;
}

// NOLINTNEXTLINE(cert-err58-cpp): RateLimit only stores numbers and reads the clock.
log::RateLimit g_watch_error_rate;

}  // namespace

std::string default_xenstore_locations() {
  const std::lock_guard lock(environment_mutex());
  if (const char* path = std::getenv(kPathVar)) return path;
  std::string socket = "/var/run/xenstored/socket";
  if (const char* rundir = std::getenv("XENSTORED_RUNDIR"))
    socket = std::string(rundir) + "/socket";
  return socket + " or /dev/xen/xenbus";
}
// NOLINTEND(concurrency-mt-unsafe)

void LibXenStore::Closer::operator()(xs_handle* h) const noexcept {
  xs_close(h);
}

LibXenStore::LibXenStore(std::optional<std::string> socket_path) {
  if (socket_path && (socket_path->empty() || has_nul(*socket_path)))
    throw SetupError("xenstore: invalid socket path '" + *socket_path + "'");
  int err = 0;
  handle_.reset(open_handle(socket_path, err));
  if (!handle_) {
    if (err == 0) err = EIO;
    if (socket_path) {
      throw SetupError("xenstore: cannot connect to " + *socket_path + ": " +
                       errno_code(err).message() +
                       " (is xenstored, or the xensim daemon of --hypervisor sim:<world-dir>, "
                       "listening there?)");
    }
    throw SetupError(xen_open_error("xenstore", default_xenstore_locations(), err));
  }
  // Create the watch pipe now, so watch_fd() is valid from the start and never fails later.
  watch_fd_ = xs_fileno(handle_.get());
  if (watch_fd_ < 0)
    throw SetupError("xenstore: cannot create the watch pipe: " + library_call_error().message());
}

LibXenStore::~LibXenStore() = default;

Result<std::string> LibXenStore::read(std::string_view path, XsTx tx) {
  if (has_nul(path)) return std::errc::invalid_argument;
  unsigned int len = 0;
  errno = 0;
  Malloced<char> value(
      static_cast<char*>(xs_read(handle_.get(), tx.id, std::string(path).c_str(), &len)));
  if (!value) return library_call_error();
  return std::string(value.get(), len);
}

std::error_code LibXenStore::write(std::string_view path, std::string_view value, XsTx tx) {
  if (has_nul(path)) return std::make_error_code(std::errc::invalid_argument);
  errno = 0;
  return status_of(xs_write(handle_.get(), tx.id, std::string(path).c_str(), value.data(),
                            static_cast<unsigned int>(value.size())));
}

std::error_code LibXenStore::mkdir(std::string_view path, XsTx tx) {
  if (has_nul(path)) return std::make_error_code(std::errc::invalid_argument);
  errno = 0;
  return status_of(xs_mkdir(handle_.get(), tx.id, std::string(path).c_str()));
}

std::error_code LibXenStore::rm(std::string_view path, XsTx tx) {
  if (has_nul(path)) return std::make_error_code(std::errc::invalid_argument);
  errno = 0;
  return status_of(xs_rm(handle_.get(), tx.id, std::string(path).c_str()));
}

Result<std::vector<std::string>> LibXenStore::directory(std::string_view path, XsTx tx) {
  if (has_nul(path)) return std::errc::invalid_argument;
  unsigned int num = 0;
  errno = 0;
  Malloced<char*> names(xs_directory(handle_.get(), tx.id, std::string(path).c_str(), &num));
  if (!names) return library_call_error();
  std::vector<std::string> out;
  out.reserve(num);
  for (unsigned int i = 0; i < num; ++i) out.emplace_back(names.get()[i]);
  return out;
}

Result<std::vector<XsPerm>> LibXenStore::get_perms(std::string_view path, XsTx tx) {
  if (has_nul(path)) return std::errc::invalid_argument;
  unsigned int num = 0;
  errno = 0;
  Malloced<xs_permissions> perms(
      xs_get_permissions(handle_.get(), tx.id, std::string(path).c_str(), &num));
  if (!perms) return library_call_error();
  std::vector<XsPerm> out;
  out.reserve(num);
  for (unsigned int i = 0; i < num; ++i) {
    const xs_permissions& p = perms.get()[i];
    out.push_back(XsPerm{DomId{static_cast<std::uint16_t>(p.id)}, kind_of(p.perms)});
  }
  return out;
}

std::error_code LibXenStore::set_perms(std::string_view path, std::span<const XsPerm> perms,
                                       XsTx tx) {
  // The first entry names the owner: a node cannot have an empty permission list.
  if (has_nul(path) || perms.empty()) return std::make_error_code(std::errc::invalid_argument);
  std::vector<xs_permissions> raw(perms.size());
  for (std::size_t i = 0; i < perms.size(); ++i)
    raw[i] = xs_permissions{perms[i].domid.value(), bits_of(perms[i].kind)};
  errno = 0;
  return status_of(xs_set_permissions(handle_.get(), tx.id, std::string(path).c_str(), raw.data(),
                                      static_cast<unsigned int>(raw.size())));
}

Result<XsTx> LibXenStore::transaction_start() {
  errno = 0;
  const xs_transaction_t t = xs_transaction_start(handle_.get());
  if (t == XBT_NULL) return library_call_error();
  return XsTx{t};
}

std::error_code LibXenStore::transaction_end(XsTx tx, bool commit) {
  errno = 0;
  return status_of(xs_transaction_end(handle_.get(), tx.id, /*abort=*/!commit));
}

std::error_code LibXenStore::watch(std::string_view path, std::string_view token) {
  if (has_nul(path) || has_nul(token)) return std::make_error_code(std::errc::invalid_argument);
  errno = 0;
  auto ec =
      status_of(xs_watch(handle_.get(), std::string(path).c_str(), std::string(token).c_str()));
  // The node a flood of this watch's events collapses into (WatchEventQueue).
  if (!ec) queue_.add_watch(path, token);
  return ec;
}

std::error_code LibXenStore::unwatch(std::string_view path, std::string_view token) {
  if (has_nul(path) || has_nul(token)) return std::make_error_code(std::errc::invalid_argument);
  errno = 0;
  auto ec =
      status_of(xs_unwatch(handle_.get(), std::string(path).c_str(), std::string(token).c_str()));
  // libxenstore filtered its own queue (XS_UNWATCH_FILTER); events already moved to ours
  // go the same way.
  queue_.remove_watch(path, token);
  return ec;
}

int LibXenStore::watch_fd() const {
  return watch_fd_;
}

void LibXenStore::drain_library_queue() {
  for (std::size_t n = 0; n < kDrainBatch; ++n) {
    errno = 0;
    Malloced<char*> event(xs_check_watch(handle_.get()));
    if (!event) {
      // EAGAIN: nothing queued. EINVAL: libxenstore's reader thread (or a failed request)
      // closed the socket, and nothing will ever arrive again. Anything else (ENOMEM) is
      // passing.
      const int err = errno;
      if (err == EINVAL) {
        if (!lost_) {
          lost_ = errno_code(EPIPE);
          log::write(log::Level::error, "xenstore", "the connection to xenstored is gone");
        }
      } else if (err != EAGAIN) {
        log::write_limited(g_watch_error_rate, log::Level::warn, "xenstore",
                           "reading watch events: " + errno_code(err).message());
      }
      return;
    }
    queue_.push(XsWatchEvent{event.get()[XS_WATCH_PATH], event.get()[XS_WATCH_TOKEN]});
  }
}

std::optional<XsWatchEvent> LibXenStore::read_watch() {
  drain_library_queue();
  return queue_.pop();
}

Result<std::string> LibXenStore::get_domain_path(DomId domid) {
  errno = 0;
  Malloced<char> path(xs_get_domain_path(handle_.get(), domid.value()));
  if (!path) return library_call_error();
  return std::string(path.get());
}

}  // namespace unetback::hv
