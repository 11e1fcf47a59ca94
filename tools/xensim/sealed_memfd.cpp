#include "tools/xensim/sealed_memfd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace unetback::xensim {

Result<UniqueFd> make_sealed_memfd(const char* name, std::size_t size) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return last_errno();
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return last_errno();
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return last_errno();
  return fd;
}

}  // namespace unetback::xensim
