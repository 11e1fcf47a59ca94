#include "common/util/unique_fd.hpp"

#include <unistd.h>

namespace unetback {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

}  // namespace unetback
