#include "common/util/fd_reserve.hpp"

#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>

namespace unetback {

std::size_t free_fds() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;  // EMFILE: not even one is free
  const int own = ::dirfd(d);
  std::uint64_t open = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const long fd = std::strtol(e->d_name, nullptr, 10);
    // Descriptors at or above the limit (opened before it was lowered) take no slot of it.
    if (fd != own && static_cast<rlim_t>(fd) < lim.rlim_cur) ++open;
  }
  ::closedir(d);
  if (lim.rlim_cur == RLIM_INFINITY) return static_cast<std::size_t>(-1) / 2;
  return lim.rlim_cur > open ? static_cast<std::size_t>(lim.rlim_cur - open) : 0;
}

Result<FdLimit> raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return last_errno();
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return last_errno();
  }
  return FdLimit{lim.rlim_cur, lim.rlim_max};
}

FdReserve::FdReserve(std::size_t spares, std::size_t floor) : spares_(spares), floor_(floor) {
  restore_spares();
}

bool FdReserve::release_spare() {
  for (auto& fd : spares_) {
    if (fd.valid()) {
      fd.reset();
      return true;
    }
  }
  return false;
}

void FdReserve::restore_spares() {
  for (auto& fd : spares_) {
    if (fd.valid()) continue;
    fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return;  // still none free: the next restore tries again
  }
}

std::size_t FdReserve::spares_held() const {
  std::size_t n = 0;
  for (const auto& fd : spares_) n += fd.valid() ? 1 : 0;
  return n;
}

}  // namespace unetback
