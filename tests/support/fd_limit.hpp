// LoweredFdLimit: lowers this process's soft RLIMIT_NOFILE so that exactly `spare` more descriptors
// fit (an fd table as full as a host with many guests would have it), and puts the limit back
// on destruction (closing the descriptors it opened to fill the table's holes).
#pragma once

#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace unetback::test {

class LoweredFdLimit {
 public:
  explicit LoweredFdLimit(std::size_t spare) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    // Every descriptor open is under the new limit (as in a table that filled up), holes
    // below the highest one are filled, and `spare` numbers stay free above it.
    std::set<long> open = open_fds();
    const long top = open.empty() ? -1 : *open.rbegin();
    for (long fd = 0; fd < top; ++fd) {
      if (open.contains(fd)) continue;
      const int f = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (f < 0) break;
      filler_.emplace_back(f);
    }
    rlimit l = saved_;
    l.rlim_cur = static_cast<rlim_t>(top + 1) + spare;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &l) == 0;
  }
  ~LoweredFdLimit() {
    ::setrlimit(RLIMIT_NOFILE, &saved_);
    for (int f : filler_) ::close(f);
  }
  LoweredFdLimit(const LoweredFdLimit&) = delete;
  LoweredFdLimit& operator=(const LoweredFdLimit&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }

  static std::set<long> open_fds() {
    std::set<long> fds;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return fds;
    const int own = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const long fd = std::strtol(e->d_name, nullptr, 10);
      if (fd != own) fds.insert(fd);
    }
    ::closedir(d);
    return fds;
  }

 private:
  rlimit saved_{};
  std::vector<int> filler_;
  bool ok_ = false;
};

}  // namespace unetback::test
