#include "tools/userhop/netns_scope.hpp"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sched.h>

namespace unetback::userhop {

Result<NetnsScope> NetnsScope::enter(const std::string& name) {
  if (name.empty()) return NetnsScope(UniqueFd{});
  UniqueFd saved(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!saved) return last_errno();
  const std::string path = "/run/netns/" + name;
  UniqueFd target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target) return last_errno();
  if (::setns(target.get(), CLONE_NEWNET) < 0) return last_errno();
  return NetnsScope(std::move(saved));
}

NetnsScope::~NetnsScope() {
  if (!saved_) return;
  if (::setns(saved_.get(), CLONE_NEWNET) < 0) {
    std::perror("unetback-userhop: cannot return to the original network namespace");
    std::abort();
  }
}

}  // namespace unetback::userhop
