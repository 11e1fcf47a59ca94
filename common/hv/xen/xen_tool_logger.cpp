#include "common/hv/xen/xen_tool_logger.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

extern "C" {
#include <xentoollog.h>
}

#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

// NOLINTNEXTLINE(cert-err58-cpp): RateLimit only stores numbers and reads the clock.
log::RateLimit g_rate{20, std::chrono::seconds(5)};

log::Level to_level(xentoollog_level level) {
  // The libraries log at ERROR for conditions we also report (as a SetupError or an
  // error_code), so their errors are our warnings: the caller decides what is fatal.
  if (level >= XTL_WARN) return log::Level::warn;
  if (level >= XTL_PROGRESS) return log::Level::info;
  return log::Level::debug;
}

extern "C" void forward_message(xentoollog_logger* /*logger*/, xentoollog_level level, int errnoval,
                                const char* context, const char* format, va_list args) {
  const log::Level l = to_level(level);
  if (static_cast<int>(l) < static_cast<int>(log::level())) return;
  char text[512];
  std::vsnprintf(text, sizeof text, format, args);
  std::string msg(text);
  if (errnoval >= 0) msg += ": " + errno_code(errnoval).message();
  log::write_limited(g_rate, l, context != nullptr ? context : "libxen", msg);
}

extern "C" void ignore_destroy(xentoollog_logger* /*logger*/) {}

xentoollog_logger g_logger{forward_message, nullptr, ignore_destroy};

}  // namespace

xentoollog_logger* xen_tool_logger() {
  return &g_logger;
}

}  // namespace unetback::hv
