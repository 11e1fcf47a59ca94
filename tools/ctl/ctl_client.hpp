// CtlClient: one connection to unetbackd's control socket; sends a request line and reads the
// reply line, each bounded by a timeout so a wedged daemon cannot hang the tool.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::ctl {

class CtlClient {
 public:
  /// Connects to `path`. ENOENT/ECONNREFUSED mean "no daemon there".
  static Result<CtlClient> connect(const std::string& path);

  /// Sends `line` (a newline is added) and returns the reply without its newline.
  Result<std::string> request(std::string_view line,
                              std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  explicit CtlClient(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  std::string buffered_;
};

}  // namespace unetback::ctl
