#include "tests/integration/xensim/xensim_process.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace unetback::test {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

std::optional<int> wait_pid(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return std::nullopt;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string xensim_binary() {
  if (const char* e = std::getenv("XENSIM_BIN"); e != nullptr && *e != '\0') return e;
#ifdef XENSIM_BIN_DEFAULT
  return XENSIM_BIN_DEFAULT;
#else
  return "xensim";
#endif
}

XensimProcess::XensimProcess(std::string extra_args, std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/xensim-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  dir_ = root_ + "/world";
  std::vector<std::string> args{xensim_binary(), "--dir", dir_};
  std::istringstream extra(extra_args);
  for (std::string a; extra >> a;) args.push_back(a);

  SpawnOptions opts;
  opts.out = Output::pipe();  // kept open so a later write by xensim cannot raise SIGPIPE
  process_ = Process(args, opts);
  if (!process_.started()) {
    std::filesystem::remove_all(root_);
    throw std::runtime_error("fork failed");
  }
  pid_ = process_.pid();
  const auto deadline = Clock::now() + timeout;
  std::string got;
  while (got.find('\n') == std::string::npos && remaining_ms(deadline) > 0)
    if (!drain(process_.out_fd(), got, std::chrono::milliseconds(remaining_ms(deadline)))) break;
  if (got.rfind("xensim ready", 0) != 0) {
    process_.kill();
    std::filesystem::remove_all(root_);
    throw std::runtime_error("xensim (" + args[0] + ") did not report ready; said: " + got);
  }
}

XensimProcess::~XensimProcess() {
  (void)process_.stop(std::chrono::seconds(30));
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

ChildProcess::ChildProcess(const std::function<int(int ctrl)>& body) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error("socketpair failed");
  UniqueFd parent(sv[0]), child(sv[1]);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    parent.reset();
    int rc = 1;
    try {
      rc = body(child.get());
    } catch (...) {
      rc = 3;
    }
    ::_exit(rc);
  }
  ctrl_ = std::move(parent);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    (void)wait_pid(pid_, std::chrono::seconds(30));
  }
}

bool ChildProcess::send(const std::string& line) const {
  return send_line(ctrl_.get(), line);
}

std::optional<std::string> ChildProcess::recv(std::chrono::milliseconds timeout) const {
  return recv_line(ctrl_.get(), timeout);
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  auto st = wait_pid(pid_, timeout);
  if (st) pid_ = -1;
  return st;
}

bool send_line(int fd, const std::string& line) {
  const std::string msg = line + "\n";
  return ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(msg.size());
}

std::optional<std::string> recv_line(int fd, std::chrono::milliseconds timeout) {
  // One byte at a time: control traffic is tiny, and nothing is read past the newline.
  const auto deadline = Clock::now() + timeout;
  std::string line;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return std::nullopt;
    char c;
    if (::read(fd, &c, 1) != 1) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

}  // namespace unetback::test
