// inode_of: which open file a descriptor is (its inode), to tell two descriptors of the same
// file from descriptors of different ones.
#pragma once

#include <sys/stat.h>

namespace unetback::test {

inline ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

}  // namespace unetback::test
