#include "common/util/milestone.hpp"

#include <cstdio>
#include <ctime>
#include <unistd.h>

#include "common/util/log.hpp"

namespace unetback {

std::string realtime_stamp() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%06ld", static_cast<long long>(ts.tv_sec),
                ts.tv_nsec / 1000);
  return buf;
}

std::string milestone_line(std::string_view name, std::string_view stamp, long pid,
                           std::string_view detail) {
  std::string line = "milestone ";
  line += name;
  line += " realtime=";
  line += stamp;
  line += " pid=" + std::to_string(pid);
  if (!detail.empty()) {
    line += ' ';
    line += detail;
  }
  return line;
}

void log_milestone(std::string_view name, std::string_view detail, std::string_view stamp) {
  const std::string now = stamp.empty() ? realtime_stamp() : std::string(stamp);
  log::write(log::Level::info, "unetbackd", milestone_line(name, now, ::getpid(), detail));
}

}  // namespace unetback
