#include "backend/daemon/private_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "common/util/result.hpp"

namespace unetback::daemon {

void require_private_directory(const std::string& dir, std::string_view what) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    throw SetupError(std::string(what) + " " + dir + ": " + last_errno().message());
  const std::string head = std::string(what) + " " + dir;
  if (!S_ISDIR(st.st_mode)) throw SetupError(head + " is not a directory (a link is refused)");
  if (st.st_uid != ::geteuid()) {
    throw SetupError(head + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                     std::to_string(::geteuid()) +
                     " that runs unetbackd (chown it, or choose another)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw SetupError(head + " is writable by others (mode " +
                     std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                     std::to_string(st.st_mode & 7) + "): chmod go-w it, or choose another");
  }
}

}  // namespace unetback::daemon
