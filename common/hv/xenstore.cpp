#include "common/hv/xenstore.hpp"

#include <cerrno>
#include <charconv>
#include <limits>

#include "common/util/parse_decimal.hpp"

namespace unetback::hv {

std::optional<XsPerm> parse_xs_perm(std::string_view s) {
  if (s.size() < 2) return std::nullopt;
  XsPerm p;
  switch (s[0]) {
    case 'n': p.kind = XsPerm::Kind::none; break;
    case 'r': p.kind = XsPerm::Kind::read; break;
    case 'w': p.kind = XsPerm::Kind::write; break;
    case 'b': p.kind = XsPerm::Kind::both; break;
    default: return std::nullopt;
  }
  auto id = parse_xs_uint<std::uint16_t>(s.substr(1));
  if (!id) return std::nullopt;
  p.domid = DomId{*id};
  return p;
}

std::string format_xs_perm(const XsPerm& p) {
  return static_cast<char>(p.kind) + std::to_string(p.domid.value());
}

template <typename T>
std::optional<T> parse_xs_uint(std::string_view s) {
  return parse_decimal<T>(s);
}

template std::optional<std::uint8_t> parse_xs_uint<std::uint8_t>(std::string_view);
template std::optional<std::uint16_t> parse_xs_uint<std::uint16_t>(std::string_view);
template std::optional<std::uint32_t> parse_xs_uint<std::uint32_t>(std::string_view);
template std::optional<std::uint64_t> parse_xs_uint<std::uint64_t>(std::string_view);

std::optional<DomId> parse_domid(std::string_view s) {
  const auto v = parse_xs_uint<std::uint16_t>(s);
  if (!v || is_reserved(DomId{*v})) return std::nullopt;
  return DomId{*v};
}

XsTransaction::XsTransaction(XenStore& xs) : xs_(&xs), open_(false) {
  auto tx = xs.transaction_start();
  if (!tx) throw SetupError("xenstore: cannot start a transaction: " + tx.error().message());
  tx_ = *tx;
  open_ = true;
}

XsTransaction::XsTransaction(XsTransaction&& o) noexcept
    : xs_(o.xs_), tx_(o.tx_), open_(std::exchange(o.open_, false)) {}

XsTransaction::~XsTransaction() {
  if (open_) (void)xs_->transaction_end(tx_, false);
}

std::error_code XsTransaction::commit() {
  if (!open_) return std::make_error_code(std::errc::invalid_argument);
  open_ = false;
  return xs_->transaction_end(tx_, true);
}

std::error_code transact(XenStore& xs, const std::function<std::error_code(XsTx)>& body,
                         int max_attempts) {
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    auto tx = xs.transaction_start();
    if (!tx) return tx.error();
    if (auto ec = body(*tx)) {
      (void)xs.transaction_end(*tx, false);
      return ec;
    }
    auto ec = xs.transaction_end(*tx, true);
    if (ec != std::errc::resource_unavailable_try_again) return ec;
  }
  return std::make_error_code(std::errc::resource_unavailable_try_again);
}

XsWatch::XsWatch(XsWatch&& o) noexcept
    : xs_(std::exchange(o.xs_, nullptr)), path_(std::move(o.path_)), token_(std::move(o.token_)) {}

XsWatch& XsWatch::operator=(XsWatch&& o) noexcept {
  if (this != &o) {
    reset();
    xs_ = std::exchange(o.xs_, nullptr);
    path_ = std::move(o.path_);
    token_ = std::move(o.token_);
  }
  return *this;
}

Result<XsWatch> XsWatch::add(XenStore& xs, std::string path, std::string token) {
  if (auto ec = xs.watch(path, token)) return ec;
  return XsWatch(xs, std::move(path), std::move(token));
}

void XsWatch::reset() {
  if (xs_ != nullptr) (void)std::exchange(xs_, nullptr)->unwatch(path_, token_);
}

}  // namespace unetback::hv
