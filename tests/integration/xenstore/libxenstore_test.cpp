// libxenstore (the real client library) against xensim's xenstored.
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

extern "C" {
#include <xenstore.h>
}

#include "common/wire/xs_wire.hpp"
#include "tests/integration/xenstore/server_fixture.hpp"

using namespace unetback;
using namespace unetback::xensim;
using namespace unetback::xensim::test;

namespace {

struct XsClose {
  void operator()(xs_handle* h) const { xs_close(h); }
};
using Xs = std::unique_ptr<xs_handle, XsClose>;

/// A libxenstore handle on the domain's socket (xs_open reads XENSTORED_PATH each time).
Xs open_as(const ServerThread& srv, int dom) {
  ::setenv("XENSTORED_PATH", srv.sock(dom).c_str(), 1);
  return Xs(xs_open(0));
}

std::string read_str(xs_handle* h, const char* path, xs_transaction_t t = XBT_NULL) {
  unsigned int len = 0;
  char* v = static_cast<char*>(xs_read(h, t, path, &len));
  if (v == nullptr) return "<errno " + std::to_string(errno) + ">";
  std::string s(v, len);
  std::free(v);
  return s;
}

bool write_str(xs_handle* h, const char* path, const std::string& v,
               xs_transaction_t t = XBT_NULL) {
  return xs_write(h, t, path, v.data(), static_cast<unsigned>(v.size()));
}

// How long a wait for something that must happen may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr int kHangGuardMs = 30'000;

/// The next watch event as "path|token", waiting at most kHangGuardMs.
std::string next_event(xs_handle* h) {
  pollfd pfd{xs_fileno(h), POLLIN, 0};
  if (::poll(&pfd, 1, kHangGuardMs) != 1) return "<timeout>";
  unsigned int n = 0;
  char** ev = xs_check_watch(h);
  if (ev == nullptr) {
    ev = xs_read_watch(h, &n);  // the pipe said an event is there
    if (ev == nullptr) return "<none>";
  }
  std::string s = std::string(ev[XS_WATCH_PATH]) + "|" + ev[XS_WATCH_TOKEN];
  std::free(ev);
  return s;
}

class Libxenstore : public ::testing::Test {
 protected:
  explicit Libxenstore(XenstoreLimits limits = {}) : srv(limits) {}
  ServerThread srv;
};

TEST_F(Libxenstore, WatchDeliversInitialEventAndChangesInOrder) {
  auto h = open_as(srv, 0);
  ASSERT_TRUE(h);
  ASSERT_TRUE(xs_watch(h.get(), "/lx", "tok"));
  EXPECT_EQ(next_event(h.get()), "/lx|tok");
  auto t = xs_transaction_start(h.get());
  ASSERT_NE(t, XBT_NULL);
  ASSERT_TRUE(write_str(h.get(), "/lx/a", "1", t));
  ASSERT_TRUE(write_str(h.get(), "/lx/b", "2", t));
  ASSERT_TRUE(xs_transaction_end(h.get(), t, false));
  EXPECT_EQ(next_event(h.get()), "/lx/a|tok");
  EXPECT_EQ(next_event(h.get()), "/lx/b|tok");
  EXPECT_EQ(read_str(h.get(), "/lx/b"), "2");
  ASSERT_TRUE(xs_unwatch(h.get(), "/lx", "tok"));
}

TEST_F(Libxenstore, ConcurrentTransactionConflictReturnsEagain) {
  auto a = open_as(srv, 0);
  auto b = open_as(srv, 0);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(write_str(a.get(), "/conf", "0"));
  auto t = xs_transaction_start(a.get());
  ASSERT_NE(t, XBT_NULL);
  EXPECT_EQ(read_str(a.get(), "/conf", t), "0");
  ASSERT_TRUE(write_str(b.get(), "/conf", "b-wins"));
  ASSERT_TRUE(write_str(a.get(), "/conf", "a", t));
  errno = 0;
  EXPECT_FALSE(xs_transaction_end(a.get(), t, false));
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(read_str(a.get(), "/conf"), "b-wins");
}

TEST_F(Libxenstore, DomUSocketIsUnprivileged) {
  auto h = open_as(srv, 1);
  ASSERT_TRUE(h);
  EXPECT_EQ(read_str(h.get(), "/tool/xenstored"), "<errno " + std::to_string(EACCES) + ">");
  errno = 0;
  EXPECT_FALSE(write_str(h.get(), "/local/domain/1/name", "evil"));
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(read_str(h.get(), "name"), "guest1");
  EXPECT_TRUE(write_str(h.get(), "data/k", "v"));
  errno = 0;
  EXPECT_FALSE(xs_introduce_domain(h.get(), 9, 0, 0));
  EXPECT_EQ(errno, EACCES);
  EXPECT_FALSE(xs_is_domain_introduced(h.get(), 1));
}

TEST_F(Libxenstore, DirectoryLargerThanOnePayloadComesBackWhole) {
  auto h = open_as(srv, 0);
  ASSERT_TRUE(h);
  const int n = 400;  // ~12 KiB of names: DIRECTORY gives E2BIG, libxenstore pages it
  auto t = xs_transaction_start(h.get());
  for (int i = 0; i < n; ++i) {
    const std::string p = "/many/child-with-a-fairly-long-name-" + std::to_string(i);
    ASSERT_TRUE(write_str(h.get(), p.c_str(), "", t));
  }
  ASSERT_TRUE(xs_transaction_end(h.get(), t, false));
  unsigned int num = 0;
  char** names = xs_directory(h.get(), XBT_NULL, "/many", &num);
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(num, static_cast<unsigned>(n));
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(std::string(names[i]), "child-with-a-fairly-long-name-" + std::to_string(i));
  std::free(static_cast<void*>(names));
}

TEST_F(Libxenstore, DomainPathAndIntroduction) {
  auto h = open_as(srv, 0);
  ASSERT_TRUE(h);
  char* p = xs_get_domain_path(h.get(), 5);
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p, "/local/domain/5");
  std::free(p);
  EXPECT_TRUE(xs_is_domain_introduced(h.get(), 0));
  EXPECT_TRUE(xs_is_domain_introduced(h.get(), 1));
  EXPECT_FALSE(xs_is_domain_introduced(h.get(), 7));

  ASSERT_TRUE(xs_watch(h.get(), "@introduceDomain", "in"));
  ASSERT_TRUE(xs_watch(h.get(), "@releaseDomain", "out"));
  EXPECT_EQ(next_event(h.get()), "@introduceDomain|in");
  EXPECT_EQ(next_event(h.get()), "@releaseDomain|out");
  ASSERT_TRUE(xs_introduce_domain(h.get(), 7, 0, 0));
  EXPECT_EQ(next_event(h.get()), "@introduceDomain|in");
  EXPECT_TRUE(std::filesystem::exists(srv.sock(7)));
  auto g = open_as(srv, 7);
  ASSERT_TRUE(g);
  EXPECT_TRUE(write_str(g.get(), "/local/domain/7/x", "1") == false) << "no home made by INTRODUCE";
  ASSERT_TRUE(xs_release_domain(h.get(), 7));
  EXPECT_EQ(next_event(h.get()), "@releaseDomain|out");
  EXPECT_FALSE(std::filesystem::exists(srv.sock(7)));
  EXPECT_FALSE(xs_is_domain_introduced(h.get(), 7));
}

TEST_F(Libxenstore, ReleaseDomainClosesItsConnections) {
  auto g = open_as(srv, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(read_str(g.get(), "name"), "guest1");
  srv.call([](XenstoreServer& s) {
    s.release_domain(DomId{1});
    return 0;
  });
  EXPECT_FALSE(std::filesystem::exists(srv.sock(1)));
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.connection_count(); }), 0u);
  // The nodes stay until the toolstack removes them.
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.read("/local/domain/1/name").value_or(""); }),
            "guest1");
}

class LibxenstoreQuota : public Libxenstore {
 protected:
  static XenstoreLimits small() {
    XenstoreLimits l;
    l.max_nodes_per_domain = 40;
    return l;
  }
  LibxenstoreQuota() : Libxenstore(small()) {}
};

TEST_F(LibxenstoreQuota, DomUHitsNodeQuotaWithEnospc) {
  auto h = open_as(srv, 1);
  ASSERT_TRUE(h);
  int err = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string p = "data/q" + std::to_string(i);
    if (!write_str(h.get(), p.c_str(), "v")) {
      err = errno;
      break;
    }
  }
  EXPECT_EQ(err, ENOSPC);
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.core().store().nodes_owned_by(DomId{1}); }),
            40u);
}

// Raw-socket behaviour libxenstore never shows: framing violations and unread events.
int connect_raw(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// True if the peer closes the socket within kHangGuardMs (reading and discarding anything
/// sent).
bool closed_by_peer(int fd) {
  char buf[65536];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHangGuardMs);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10) == 1) {
      const auto n = ::read(fd, buf, sizeof(buf));
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
  }
  return false;
}

TEST_F(Libxenstore, OversizedMessageClosesOnlyThatConnection) {
  auto good = open_as(srv, 0);
  int fd = connect_raw(srv.sock(0));
  ASSERT_GE(fd, 0);
  wire::XsMsgHeader hdr{static_cast<std::uint32_t>(wire::XsType::write), 1, 0,
                        wire::kXsPayloadMax + 1};
  ASSERT_EQ(::write(fd, &hdr, sizeof(hdr)), static_cast<ssize_t>(sizeof(hdr)));
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
  EXPECT_TRUE(write_str(good.get(), "/still/alive", "yes"));
}

class LibxenstoreSmallQueue : public Libxenstore {
 protected:
  static XenstoreLimits small() {
    XenstoreLimits l;
    l.max_queued_messages_per_connection = 16;
    return l;
  }
  LibxenstoreSmallQueue() : Libxenstore(small()) {}
};

/// Registers a watch over a raw connection (no reader: nothing is ever read from `fd`).
void raw_watch(int fd, const std::string& path, const std::string& token) {
  std::string payload = path + '\0' + token + '\0';
  wire::XsMsgHeader hdr{static_cast<std::uint32_t>(wire::XsType::watch), 1, 0,
                        static_cast<std::uint32_t>(payload.size())};
  ASSERT_EQ(::write(fd, &hdr, sizeof(hdr)), static_cast<ssize_t>(sizeof(hdr)));
  ASSERT_EQ(::write(fd, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
}

/// Waits until the server holds `n` watches; false after kHangGuardMs.
bool wait_for_watches(ServerThread& srv, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHangGuardMs);
  while (srv.call([](XenstoreServer& s) { return s.core().watches().size(); }) != n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Reads what `fd` has buffered and counts the WATCH_EVENT messages: it reads until nothing
/// more came for 200 ms (what the server still flushes from its queue once there is room).
/// A slow server only makes the count smaller.
std::size_t count_buffered_events(int fd) {
  std::string in;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) != 1) break;
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  std::size_t events = 0;
  for (std::size_t off = 0; off + sizeof(wire::XsMsgHeader) <= in.size();) {
    wire::XsMsgHeader h{};
    std::memcpy(&h, in.data() + off, sizeof h);
    if (h.type == static_cast<std::uint32_t>(wire::XsType::watch_event)) ++events;
    off += sizeof h + h.len;
  }
  return events;
}

TEST_F(LibxenstoreSmallQueue, GuestThatNeverReadsEventsOnManyNodesIsDisconnected) {
  int fd = connect_raw(srv.sock(1));
  ASSERT_GE(fd, 0);
  raw_watch(fd, "/local/domain/1/flood", std::string(3000, 't'));
  ASSERT_TRUE(wait_for_watches(srv, 1));
  std::size_t before = srv.call([](XenstoreServer& s) { return s.connection_count(); });
  EXPECT_EQ(before, 1u);
  // Distinct nodes: no event is a duplicate of a queued one.
  for (int i = 0; i < 2000; ++i) {
    srv.call([i](XenstoreServer& s) {
      return s.write("/local/domain/1/flood/n" + std::to_string(i), "x");
    });
    if (srv.call([](XenstoreServer& s) { return s.connection_count(); }) == 0) break;
  }
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.connection_count(); }), 0u);
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.core().watches().size(); }), 0u);
  ::close(fd);
}

// XSA-349, and Xen 4.17's xenstored: an event identical to one still queued is dropped, and
// the privileged domain is never disconnected for output it does not read. A dom0 backend
// busy elsewhere while a guest rewrites its state 5000 times keeps its connection, and finds
// a bounded number of events waiting, not 5000.
TEST_F(LibxenstoreSmallQueue, DomZeroNotReadingAGuestsStateFloodKeepsItsConnection) {
  int fd = connect_raw(srv.sock(0));
  ASSERT_GE(fd, 0);
  raw_watch(fd, "/local/domain/1/device/vif/0/state", std::string(3000, 't'));
  ASSERT_TRUE(wait_for_watches(srv, 1));
  // The toolstack made the frontend's state node and gave it to the guest.
  ASSERT_FALSE(srv.call([](XenstoreServer& s) {
    const std::string node = "/local/domain/1/device/vif/0/state";
    if (auto ec = s.write(node, "1")) return ec;
    const hv::XsPerm perms[] = {{DomId{1}, hv::XsPerm::Kind::none}};
    return s.set_perms(node, perms);
  }));
  auto guest = open_as(srv, 1);
  ASSERT_TRUE(guest);
  for (int i = 0; i < 5000; ++i)
    ASSERT_TRUE(write_str(guest.get(), "/local/domain/1/device/vif/0/state", i % 2 ? "1" : "2"));
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.connection_count(); }), 2u)
      << "dom0's connection was dropped";
  EXPECT_EQ(srv.call([](XenstoreServer& s) { return s.core().watches().size(); }), 1u);
  // What the socket buffer took before the queue filled, plus one pending event. A count,
  // not a timing: dom0 reads nothing until the flood is over, so what waits is bounded by
  // the socket buffer and the server's small queue whatever the speed; without the
  // duplicate drop it would be thousands.
  const std::size_t events = count_buffered_events(fd);
  EXPECT_GE(events, 2u);
  EXPECT_LT(events, 500u) << "duplicates of a queued event were not dropped";
  ::close(fd);
}

}  // namespace
