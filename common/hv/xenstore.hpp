// XenStore: a connection to xenstored (libxenstore's role) with transactions and watches.
// Paths are absolute ("/local/domain/0/backend/vif/1/0/state").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

/// A transaction id; {} (0) means "no transaction" (XBT_NULL).
struct XsTx {
  std::uint32_t id = 0;
  friend bool operator==(XsTx, XsTx) = default;
};

/// One entry of a node's permission list. The first entry names the owner (who may do
/// anything) and the access of every domain not listed later; later entries are ACLs.
struct XsPerm {
  enum class Kind : char { none = 'n', read = 'r', write = 'w', both = 'b' };
  DomId domid{};
  Kind kind = Kind::none;
  friend bool operator==(const XsPerm&, const XsPerm&) = default;
};

/// "r5" -> {5, read}. Rejects anything that is not [nrwb] followed by a decimal domid.
[[nodiscard]] std::optional<XsPerm> parse_xs_perm(std::string_view s);
[[nodiscard]] std::string format_xs_perm(const XsPerm& p);

struct XsWatchEvent {
  std::string path;   // the node that changed (or the watched path, for the initial event)
  std::string token;  // the token given to watch()
};

class XenStore {
 public:
  virtual ~XenStore() = default;

  virtual Result<std::string> read(std::string_view path, XsTx tx = {}) = 0;
  virtual std::error_code write(std::string_view path, std::string_view value, XsTx tx = {}) = 0;
  virtual std::error_code mkdir(std::string_view path, XsTx tx = {}) = 0;
  /// Removes a node and its children. Removing a missing node is an error (ENOENT).
  virtual std::error_code rm(std::string_view path, XsTx tx = {}) = 0;
  virtual Result<std::vector<std::string>> directory(std::string_view path, XsTx tx = {}) = 0;
  virtual Result<std::vector<XsPerm>> get_perms(std::string_view path, XsTx tx = {}) = 0;
  virtual std::error_code set_perms(std::string_view path, std::span<const XsPerm> perms,
                                    XsTx tx = {}) = 0;

  virtual Result<XsTx> transaction_start() = 0;
  /// Commits (or aborts). A commit that conflicts with a concurrent change fails with
  /// EAGAIN; the caller retries the whole transaction (see transact()).
  virtual std::error_code transaction_end(XsTx tx, bool commit) = 0;

  /// Registers a watch; xenstored fires one event at once, then one per change of the
  /// node or a descendant. Events are read with read_watch() when watch_fd() is readable.
  virtual std::error_code watch(std::string_view path, std::string_view token) = 0;
  virtual std::error_code unwatch(std::string_view path, std::string_view token) = 0;
  [[nodiscard]] virtual int watch_fd() const = 0;
  /// The next queued watch event, without blocking; nullopt when none is queued. An event
  /// identical (same token and path) to one still queued may be merged into it (XSA-349).
  virtual std::optional<XsWatchEvent> read_watch() = 0;
  /// Why the connection to xenstored is gone for good (it closed, or a request broke it),
  /// or no error while it works. Checked after read_watch(): a connection that died sends
  /// no event to say so.
  [[nodiscard]] virtual std::error_code connection_error() const { return {}; }

  virtual Result<std::string> get_domain_path(DomId domid) = 0;
};

/// A transaction that aborts on destruction unless committed. Move-only.
class XsTransaction {
 public:
  explicit XsTransaction(XenStore& xs);  // throws SetupError if none can be started
  ~XsTransaction();
  XsTransaction(XsTransaction&& o) noexcept;
  XsTransaction& operator=(XsTransaction&&) = delete;
  XsTransaction(const XsTransaction&) = delete;
  XsTransaction& operator=(const XsTransaction&) = delete;

  [[nodiscard]] XsTx id() const { return tx_; }
  /// Ends the transaction with a commit; EAGAIN on conflict. Either way it is over.
  std::error_code commit();

 private:
  XenStore* xs_;
  XsTx tx_;
  bool open_;
};

/// Runs `body(tx)` in a transaction and commits it, starting over on EAGAIN up to
/// `max_attempts` times. A non-empty error from body aborts the transaction and is returned.
std::error_code transact(XenStore& xs, const std::function<std::error_code(XsTx)>& body,
                         int max_attempts = 64);

/// A registered watch; the destructor unregisters it. Move-only.
class XsWatch {
 public:
  XsWatch() = default;
  XsWatch(XenStore& xs, std::string path, std::string token)
      : xs_(&xs), path_(std::move(path)), token_(std::move(token)) {}
  ~XsWatch() { reset(); }
  XsWatch(XsWatch&& o) noexcept;
  XsWatch& operator=(XsWatch&& o) noexcept;
  XsWatch(const XsWatch&) = delete;
  XsWatch& operator=(const XsWatch&) = delete;

  /// Registers the watch and returns the RAII handle, or the error.
  static Result<XsWatch> add(XenStore& xs, std::string path, std::string token);

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& token() const { return token_; }
  void reset();

 private:
  XenStore* xs_ = nullptr;
  std::string path_, token_;
};

/// Parses an unsigned decimal xenstore value strictly (no sign, no spaces, no trailing
/// junk, no overflow of T). Frontend-written values are hostile: use this, not atoi.
template <typename T>
[[nodiscard]] std::optional<T> parse_xs_uint(std::string_view s);

extern template std::optional<std::uint8_t> parse_xs_uint<std::uint8_t>(std::string_view);
extern template std::optional<std::uint16_t> parse_xs_uint<std::uint16_t>(std::string_view);
extern template std::optional<std::uint32_t> parse_xs_uint<std::uint32_t>(std::string_view);
extern template std::optional<std::uint64_t> parse_xs_uint<std::uint64_t>(std::string_view);

/// A domain's id as xenstore and command lines write it: parse_xs_uint's strict decimal, and
/// below kFirstReservedDomId (a reserved id names no domain).
[[nodiscard]] std::optional<DomId> parse_domid(std::string_view s);

}  // namespace unetback::hv
