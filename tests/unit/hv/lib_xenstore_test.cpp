// LibXenStore against a scripted xenstored peer on a unix socket in a temp dir: checks what
// libxenstore puts on the wire for each call, that replies (errors included) come back as
// values and error_codes, and that watch events are read without blocking.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/hv/xen/xen_xenstore.hpp"
#include "common/util/unique_fd.hpp"
#include "common/wire/xs_wire.hpp"

namespace unetback::hv {
namespace {

using namespace std::string_literals;
using wire::XsMsgHeader;

struct Request {
  std::uint32_t type = 0;
  std::uint32_t tx_id = 0;
  std::string payload;
};

struct Reply {
  std::uint32_t type = 0;  // 0: the request's type (success); XS_ERROR for an error
  std::string payload;
  std::vector<std::pair<std::string, std::string>> events;  // sent right after the reply
};

Reply ok() {
  return {0, "OK\0"s, {}};
}
Reply error(const char* name) {
  return {XS_ERROR, std::string(name) + '\0', {}};
}

bool read_all(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// A xenstored stand-in serving one connection: every request is recorded and answered by
/// the test's handler; events can also be pushed at any time.
class ScriptedXenstored {
 public:
  using Handler = std::function<Reply(const Request&)>;

  ScriptedXenstored(const std::string& path, Handler handler)
      : handler_(std::move(handler)), listener_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    if (!listener_ ||
        ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_.get(), 1) != 0)
      throw std::runtime_error("cannot listen on " + path);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedXenstored() {
    stop_ = true;
    thread_.join();
  }
  ScriptedXenstored(const ScriptedXenstored&) = delete;
  ScriptedXenstored& operator=(const ScriptedXenstored&) = delete;

  void send_event(std::string path, std::string token) {
    const std::lock_guard lock(mutex_);
    events_.emplace_back(std::move(path), std::move(token));
  }
  std::vector<Request> requests() {
    const std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  static constexpr int kPollMs = 20;

  static bool send(int fd, std::uint32_t type, std::uint32_t req_id, std::uint32_t tx_id,
                   const std::string& payload) {
    XsMsgHeader h{type, req_id, tx_id, static_cast<std::uint32_t>(payload.size())};
    return write_all(fd, &h, sizeof h) && write_all(fd, payload.data(), payload.size());
  }
  static bool send_event(int fd, const std::pair<std::string, std::string>& e) {
    return send(fd, XS_WATCH_EVENT, 0, 0, e.first + '\0' + e.second + '\0');
  }

  void serve() {
    UniqueFd client;
    while (!stop_ && !client) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, kPollMs) == 1)
        client = UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    while (!stop_) {
      {
        std::deque<std::pair<std::string, std::string>> events;
        {
          const std::lock_guard lock(mutex_);
          events.swap(events_);
        }
        for (const auto& e : events)
          if (!send_event(client.get(), e)) return;
      }
      pollfd p{client.get(), POLLIN, 0};
      if (::poll(&p, 1, kPollMs) != 1) continue;
      XsMsgHeader h{};
      if (!read_all(client.get(), &h, sizeof h)) return;  // the client closed
      Request req{h.type, h.tx_id, std::string(h.len, '\0')};
      if (!read_all(client.get(), req.payload.data(), h.len)) return;
      {
        const std::lock_guard lock(mutex_);
        requests_.push_back(req);
      }
      const Reply r = handler_(req);
      if (!send(client.get(), r.type != 0 ? r.type : h.type, h.req_id, h.tx_id, r.payload)) return;
      for (const auto& e : r.events)
        if (!send_event(client.get(), e)) return;
    }
  }

  Handler handler_;
  UniqueFd listener_;
  std::mutex mutex_;
  std::vector<Request> requests_;
  std::deque<std::pair<std::string, std::string>> events_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class LibXenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "unetback-xs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    sock_ = (dir_ / "xs-dom0.sock").string();
  }
  void TearDown() override {
    xs_.reset();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  /// Starts the peer and connects a LibXenStore to it.
  LibXenStore& connect(ScriptedXenstored::Handler handler) {
    server_ = std::make_unique<ScriptedXenstored>(sock_, std::move(handler));
    xs_ = std::make_unique<LibXenStore>(sock_);
    return *xs_;
  }

  std::filesystem::path dir_;
  std::string sock_;
  std::unique_ptr<ScriptedXenstored> server_;
  std::unique_ptr<LibXenStore> xs_;
};

// A guard against a hang only (30 s): a run that works has its event long before.
bool wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 30'000) == 1;
}

TEST_F(LibXenStoreTest, ConnectsToTheGivenSocketAndLeavesTheEnvironmentAsItWas) {
  const char* before = std::getenv("XENSTORED_PATH");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  auto& xs = connect([](const Request&) { return Reply{0, "vif", {}}; });
  const char* after = std::getenv("XENSTORED_PATH");
  EXPECT_EQ(after ? std::optional<std::string>(after) : std::nullopt, saved);

  auto v = xs.read("/local/domain/1/device/vif/0/backend");
  ASSERT_TRUE(v) << v.error().message();
  EXPECT_EQ(*v, "vif");
  const auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].type, XS_READ);
  EXPECT_EQ(reqs[0].payload, "/local/domain/1/device/vif/0/backend\0"s);
}

TEST_F(LibXenStoreTest, ErrorRepliesBecomeErrorCodes) {
  auto& xs = connect([](const Request& r) {
    if (r.type == XS_READ) return error("ENOENT");
    if (r.type == XS_WRITE) return error("EACCES");
    if (r.type == XS_RM) return error("ENOENT");
    return error("EINVAL");
  });
  EXPECT_EQ(xs.read("/missing").error(), std::errc::no_such_file_or_directory);
  EXPECT_EQ(xs.write("/local/domain/0/x", "1"), std::errc::permission_denied);
  EXPECT_EQ(xs.rm("/gone"), std::errc::no_such_file_or_directory);
  EXPECT_EQ(xs.mkdir("/bad"), std::errc::invalid_argument);
}

TEST_F(LibXenStoreTest, WriteSendsPathAndValueAndMkdirRmSendPaths) {
  auto& xs = connect([](const Request&) { return ok(); });
  EXPECT_FALSE(xs.write("/a/state", "4"));
  EXPECT_FALSE(xs.write("/a/empty", ""));
  EXPECT_FALSE(xs.mkdir("/a/dir"));
  EXPECT_FALSE(xs.rm("/a"));
  const auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].type, XS_WRITE);
  EXPECT_EQ(reqs[0].payload, "/a/state\0"s + "4");
  EXPECT_EQ(reqs[1].payload, "/a/empty\0"s);
  EXPECT_EQ(reqs[2].type, XS_MKDIR);
  EXPECT_EQ(reqs[2].payload, "/a/dir\0"s);
  EXPECT_EQ(reqs[3].type, XS_RM);
  EXPECT_EQ(reqs[3].payload, "/a\0"s);
}

TEST_F(LibXenStoreTest, DirectoryListsTheChildNames) {
  auto& xs = connect([](const Request& r) {
    if (r.payload == "/local/domain\0"s) return Reply{0, "0\0"s + "1\0"s + "17\0"s, {}};
    return Reply{0, "", {}};
  });
  auto names = xs.directory("/local/domain");
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, (std::vector<std::string>{"0", "1", "17"}));
  auto empty = xs.directory("/local/domain/17");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST_F(LibXenStoreTest, PermissionsConvertBothWays) {
  auto& xs = connect([](const Request& r) {
    if (r.type == XS_GET_PERMS) return Reply{0, "n0\0"s + "r5\0"s + "w7\0"s + "b9\0"s, {}};
    return ok();
  });
  auto perms = xs.get_perms("/local/domain/5/device/vif/0");
  ASSERT_TRUE(perms);
  EXPECT_EQ(*perms, (std::vector<XsPerm>{{DomId{0}, XsPerm::Kind::none},
                                         {DomId{5}, XsPerm::Kind::read},
                                         {DomId{7}, XsPerm::Kind::write},
                                         {DomId{9}, XsPerm::Kind::both}}));
  EXPECT_FALSE(xs.set_perms("/p", *perms));
  EXPECT_EQ(xs.set_perms("/p", {}), std::errc::invalid_argument);
  const auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].type, XS_SET_PERMS);
  EXPECT_EQ(reqs[1].payload, "/p\0"s + "n0\0"s + "r5\0"s + "w7\0"s + "b9\0"s);
}

TEST_F(LibXenStoreTest, TransactionIdGoesOnTheWireAndConflictIsEagain) {
  auto& xs = connect([](const Request& r) {
    if (r.type == XS_TRANSACTION_START) return Reply{0, "17\0"s, {}};
    if (r.type == XS_TRANSACTION_END && r.payload == "T\0"s) return error("EAGAIN");
    return ok();
  });
  auto tx = xs.transaction_start();
  ASSERT_TRUE(tx);
  EXPECT_EQ(*tx, XsTx{17});
  EXPECT_FALSE(xs.write("/a", "1", *tx));
  EXPECT_EQ(xs.transaction_end(*tx, true), std::errc::resource_unavailable_try_again);
  EXPECT_FALSE(xs.transaction_end(XsTx{18}, false));
  const auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[1].tx_id, 17u);
  EXPECT_EQ(reqs[2].type, XS_TRANSACTION_END);
  EXPECT_EQ(reqs[2].tx_id, 17u);
  EXPECT_EQ(reqs[2].payload, "T\0"s);
  EXPECT_EQ(reqs[3].tx_id, 18u);
  EXPECT_EQ(reqs[3].payload, "F\0"s);
}

TEST_F(LibXenStoreTest, TransactRetriesAConflictReportedByXenstored) {
  int ends = 0;
  auto& xs = connect([&ends](const Request& r) {
    if (r.type == XS_TRANSACTION_START) return Reply{0, "3\0"s, {}};
    if (r.type == XS_TRANSACTION_END) return ++ends < 3 ? error("EAGAIN") : ok();
    return ok();
  });
  int bodies = 0;
  EXPECT_FALSE(transact(xs, [&](XsTx tx) {
    ++bodies;
    return xs.write("/b/state", "2", tx);
  }));
  EXPECT_EQ(bodies, 3);
}

TEST_F(LibXenStoreTest, WatchEventsAreReadWithoutBlocking) {
  auto& xs = connect([](const Request& r) {
    if (r.type == XS_WATCH) return Reply{0, "OK\0"s, {{"/be/vif", "tok"}}};  // initial event
    return ok();
  });
  EXPECT_EQ(xs.read_watch(), std::nullopt);  // nothing queued: returns at once
  ASSERT_FALSE(xs.watch("/be/vif", "tok"));
  ASSERT_TRUE(wait_readable(xs.watch_fd()));
  auto ev = xs.read_watch();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->path, "/be/vif");
  EXPECT_EQ(ev->token, "tok");
  EXPECT_EQ(xs.read_watch(), std::nullopt);

  server_->send_event("/be/vif/1/0/state", "tok");
  ASSERT_TRUE(wait_readable(xs.watch_fd()));
  ev = xs.read_watch();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->path, "/be/vif/1/0/state");

  ASSERT_FALSE(xs.unwatch("/be/vif", "tok"));
  const auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].payload, "/be/vif\0"s + "tok\0"s);
  EXPECT_EQ(reqs[1].type, XS_UNWATCH);
  EXPECT_EQ(reqs[1].payload, "/be/vif\0"s + "tok\0"s);
}

TEST_F(LibXenStoreTest, GetDomainPathAsksXenstored) {
  auto& xs = connect([](const Request&) { return Reply{0, "/local/domain/5\0"s, {}}; });
  auto p = xs.get_domain_path(DomId{5});
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "/local/domain/5");
  EXPECT_EQ(server_->requests().at(0).type, XS_GET_DOMAIN_PATH);
  EXPECT_EQ(server_->requests().at(0).payload, "5\0"s);
}

TEST_F(LibXenStoreTest, PathsWithAnEmbeddedNulAreRefusedLocally) {
  auto& xs = connect([](const Request&) { return ok(); });
  const std::string bad = "/local/domain/0\0/evil"s;
  EXPECT_EQ(xs.read(bad).error(), std::errc::invalid_argument);
  EXPECT_EQ(xs.write(bad, "1"), std::errc::invalid_argument);
  EXPECT_EQ(xs.watch("/a", "t\0x"s), std::errc::invalid_argument);
  EXPECT_TRUE(server_->requests().empty());
}

}  // namespace
}  // namespace unetback::hv
