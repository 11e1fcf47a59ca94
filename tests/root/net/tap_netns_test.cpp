// TapDevice against the real kernel, each test inside a network namespace of its own.
//
// The namespace belongs to one thread: the test body runs on a fresh std::thread that calls
// unshare(CLONE_NEWNET) first, so the root namespace's interfaces are never touched, and
// when the thread ends (even after a failed ASSERT) its namespace and everything in it go
// away with it. Child processes (`ip`) started from that thread inherit its namespace.
// Needs root and /dev/net/tun; skips cleanly otherwise.
#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/ethtool.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/net/bytes.hpp"
#include "common/net/frame_builder.hpp"
#include "common/net/tap_device.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/util/unique_fd.hpp"
#include "tests/support/packet_socket.hpp"

namespace unetback::net {
namespace {

constexpr int kPollTimeoutMs = 2000;
constexpr MacAddress kTapMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr MacAddress kPeerMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};

// Why the test cannot run here, or empty.
std::string skip_reason() {
  if (::geteuid() != 0) return "needs root (CAP_NET_ADMIN) to create namespaces and TAPs";
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) return "/dev/net/tun is missing";
  return {};
}

#define SKIP_UNLESS_ROOT_AND_TUN()         \
  do {                                     \
    const std::string why = skip_reason(); \
    if (!why.empty()) GTEST_SKIP() << why; \
  } while (false)

// Runs `body` on a new thread inside a new network namespace. Returns false (and the test
// is skipped by the caller) when the namespace cannot be created.
[[nodiscard]] bool run_in_new_netns(const std::function<void()>& body) {
  int unshare_errno = 0;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      unshare_errno = errno;
      return;
    }
    body();
  });
  t.join();
  return unshare_errno == 0;
}

// Variadic: the lambda body's commas would otherwise split the macro argument.
#define IN_NEW_NETNS(...)                                                               \
  do {                                                                                  \
    if (!run_in_new_netns(__VA_ARGS__)) GTEST_SKIP() << "unshare(CLONE_NEWNET) failed"; \
  } while (false)

// Runs a shell command in the calling thread's namespace; true on exit status 0.
bool sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return rc == 0;
}

TapConfig offload_config(const std::string& name) {
  TapConfig cfg;
  cfg.name = name;
  cfg.vnet_hdr = true;
  cfg.offloads = TapOffloads{.csum = true, .tso4 = true, .tso6 = true};
  cfg.non_blocking = true;
  cfg.mac = kTapMac;
  cfg.mtu = 1500;
  return cfg;
}

// An ethtool "get" of a single boolean feature (legacy ETHTOOL_G* commands).
int ethtool_get(const std::string& ifname, std::uint32_t cmd) {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ethtool_value ev{};
  ev.cmd = cmd;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&ev);
  if (::ioctl(s.get(), SIOCETHTOOL, &ifr) < 0) return -errno;
  return static_cast<int>(ev.data);
}

bool wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, kPollTimeoutMs) == 1;
}

TEST(TapDeviceNetns, CreatesTapWithVnetHdrAndOffloadsVisibleToEthtool) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    auto tap = TapDevice::create(offload_config("vif1.0"));
    ASSERT_TRUE(tap) << tap.error().message();
    EXPECT_EQ(tap->name(), "vif1.0");
    EXPECT_TRUE(tap->vnet_hdr());
    EXPECT_EQ(tap->vnet_hdr_len(), 12u);
    EXPECT_EQ(tap->ifindex(), static_cast<int>(::if_nametoindex("vif1.0")));
    ASSERT_FALSE(tap->set_up(true));
    EXPECT_EQ(ethtool_get("vif1.0", ETHTOOL_GTXCSUM), 1);
    EXPECT_EQ(ethtool_get("vif1.0", ETHTOOL_GTSO), 1);

    // MAC and MTU as configured.
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "vif1.0", IFNAMSIZ - 1);
    ASSERT_EQ(::ioctl(s.get(), SIOCGIFHWADDR, &ifr), 0);
    EXPECT_EQ(std::memcmp(ifr.ifr_hwaddr.sa_data, kTapMac.octets.data(), 6), 0);
    ASSERT_EQ(::ioctl(s.get(), SIOCGIFMTU, &ifr), 0);
    EXPECT_EQ(ifr.ifr_mtu, 1500);
    ASSERT_EQ(::ioctl(s.get(), SIOCGIFFLAGS, &ifr), 0);
    EXPECT_NE(ifr.ifr_flags & IFF_UP, 0);

    // Turning the offloads off is visible too (a frontend reconnecting without GSO).
    ASSERT_FALSE(tap->set_offloads(TapOffloads{}));
    EXPECT_EQ(ethtool_get("vif1.0", ETHTOOL_GTSO), 0);
    EXPECT_EQ(ethtool_get("vif1.0", ETHTOOL_GTXCSUM), 0);
    ASSERT_FALSE(tap->set_up(false));
    ASSERT_EQ(::ioctl(s.get(), SIOCGIFFLAGS, &ifr), 0);
    EXPECT_EQ(ifr.ifr_flags & IFF_UP, 0);
  });
}

TEST(TapDeviceNetns, ClosingTheTapRemovesTheInterface) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    {
      auto tap = TapDevice::create(offload_config("vif2.0"));
      ASSERT_TRUE(tap) << tap.error().message();
      EXPECT_NE(::if_nametoindex("vif2.0"), 0u);
      TapDevice moved = std::move(*tap);  // ownership moves; the interface stays
      EXPECT_NE(::if_nametoindex("vif2.0"), 0u);
    }
    EXPECT_EQ(::if_nametoindex("vif2.0"), 0u);
  });
}

TEST(TapDeviceNetns, NameInUseIsEbusyWithAClearMessage) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    auto first = TapDevice::create(offload_config("vif3.0"));
    ASSERT_TRUE(first) << first.error().message();
    auto second = TapDevice::create(offload_config("vif3.0"));
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), std::errc::device_or_resource_busy);
    EXPECT_EQ(second.error(), TapError::name_in_use);
    EXPECT_NE(second.error().message().find("already exists"), std::string::npos);
    // Another kind of interface with that name counts as in use too (IFF_TUN_EXCL).
    auto lo = TapDevice::create(offload_config("lo"));
    ASSERT_FALSE(lo);
    EXPECT_EQ(lo.error(), std::errc::device_or_resource_busy);
  });
}

// The bridge `dev` is a port of ("" if none), as `ip link` in this thread's namespace says
// (/sys shows the namespace it was mounted in).
std::string master_of(const std::string& dev) {
  FILE* p = ::popen(("ip -o link show dev " + dev + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return {};
  char buf[1024] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  const std::string out(buf, n);
  const auto at = out.find(" master ");
  if (at == std::string::npos) return {};
  return out.substr(at + 8, out.find(' ', at + 8) - at - 8);
}

TEST(TapDeviceNetns, PersistentTapOutlivesItsDeadMakerAndIsAttachedAgainWithItsIfindex) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    TapConfig cfg = offload_config("vif7.0");
    cfg.multi_queue = true;
    cfg.queues = 2;
    // The maker makes it persistent, puts it on a bridge (as vif-bridge does), renames it (as
    // a hotplug script with B:vifname does) and dies without closing anything in order.
    const pid_t maker = ::fork();
    ASSERT_GE(maker, 0);
    if (maker == 0) {
      auto tap = TapDevice::create(cfg);
      if (!tap || tap->set_persistent(true)) std::_Exit(1);
      std::_Exit(0);  // no destructor runs: like SIGKILL, the kernel closes the fds
    }
    int status = 0;
    ASSERT_EQ(::waitpid(maker, &status, 0), maker);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const unsigned idx = ::if_nametoindex("vif7.0");
    ASSERT_NE(idx, 0u) << "a persistent TAP outlives its maker";
    ASSERT_TRUE(
        sh("ip link add br7 type bridge && ip link set vif7.0 master br7 && "
           "ip link set vif7.0 name guest7"));

    auto again = TapDevice::attach(static_cast<int>(idx), cfg);
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->ifindex(), static_cast<int>(idx));
    EXPECT_EQ(again->name(), "guest7");
    EXPECT_EQ(again->queue_count(), 2u);
    EXPECT_EQ(master_of("guest7"), "br7") << "still a port of its bridge";
    ASSERT_FALSE(again->set_up(true));
    {
      auto q1 = again->queue_fd(1);  // every queue is there again
      ASSERT_TRUE(q1);
    }

    // Kept for a successor, it survives this owner too; an orderly close removes it.
    again->keep_for_successor();
    again = errno_code(EIO);
    EXPECT_EQ(::if_nametoindex("guest7"), idx);
    auto last = TapDevice::attach(static_cast<int>(idx), cfg);
    ASSERT_TRUE(last) << last.error().message();
    last = errno_code(EIO);
    EXPECT_EQ(::if_nametoindex("guest7"), 0u) << "an orderly close leaves nothing behind";
    (void)sh("ip link del br7");
  });
}

// What a local user who is not root gets for TUNSETIFF with TAP `name` and each combination of
// flags a TAP can be asked with: a child process opens /dev/net/tun as root (Debian's
// /dev/net/tun is mode 0666: anyone may open it), drops to uid and gid 65534 with no
// capabilities, then tries every combination. 0 for one that attached a queue, else the errno.
std::vector<std::pair<int, int>> unprivileged_attach_attempts(const std::string& name) {
  std::vector<int> combos;
  for (int bits = 0; bits < 8; ++bits) {
    int f = IFF_TAP;
    if ((bits & 1) != 0) f |= IFF_NO_PI;
    if ((bits & 2) != 0) f |= IFF_VNET_HDR;
    if ((bits & 4) != 0) f |= IFF_MULTI_QUEUE;
    combos.push_back(f);
  }
  std::vector<UniqueFd> fds;
  for (std::size_t i = 0; i < combos.size(); ++i) fds.emplace_back(::open("/dev/net/tun", O_RDWR));
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  ifreq ifr = {};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    const gid_t nobody = 65534;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
        ::setresuid(nobody, nobody, nobody) != 0)
      std::_Exit(2);
    for (std::size_t i = 0; i < combos.size(); ++i) {
      ifr.ifr_flags = static_cast<short>(combos[i]);
      const int result = ::ioctl(fds[i].get(), TUNSETIFF, &ifr) == 0 ? 0 : errno;
      const int rec[2] = {combos[i], result};
      if (::write(pipe_fds[1], rec, sizeof rec) != sizeof rec) std::_Exit(3);
    }
    std::_Exit(0);
  }
  ::close(pipe_fds[1]);
  std::vector<std::pair<int, int>> out;
  int rec[2];
  while (::read(pipe_fds[0], rec, sizeof rec) == sizeof rec) out.emplace_back(rec[0], rec[1]);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out.clear();
  return out;
}

// A vif's TAP is its maker's: a local user who is not root cannot attach a queue to it by name
// (and so read the guest's frames, or send as the guest), whatever flags it asks with, for a
// TAP of 1 and of 4 queues, after the TAP was renamed (as vif-bridge does with B:vifname), and
// for a TAP an older program left without an owner once it has been attached again. The
// combinations whose flags match the TAP's are refused EPERM; the others EINVAL.
TEST(TapDeviceNetns, NoUserButItsMakerCanAttachAQueueToATap) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    const auto expect_refused = [](const std::string& name, bool multi_queue) {
      const auto attempts = unprivileged_attach_attempts(name);
      ASSERT_EQ(attempts.size(), 8u) << "the unprivileged child did not run";
      for (const auto& [flags, result] : attempts) {
        EXPECT_NE(result, 0) << name << ": attached with flags 0x" << std::hex << flags;
        if (((flags & IFF_MULTI_QUEUE) != 0) == multi_queue)
          EXPECT_EQ(result, EPERM) << name << ": flags 0x" << std::hex << flags;
      }
    };
    for (const std::uint32_t queues : {1u, 4u}) {
      TapConfig cfg = offload_config("vif9.0");
      cfg.multi_queue = true;
      cfg.queues = queues;
      auto tap = TapDevice::create(cfg);
      ASSERT_TRUE(tap) << tap.error().message();
      expect_refused("vif9.0", true);
      ASSERT_TRUE(sh("ip link set vif9.0 name guest9"));
      expect_refused("guest9", true);
    }
    {
      TapConfig cfg = offload_config("vif9.1");
      auto tap = TapDevice::create(cfg);
      ASSERT_TRUE(tap) << tap.error().message();
      expect_refused("vif9.1", false);
    }
    // A TAP made persistent without an owner, as an older daemon left it: anyone could attach;
    // once attached again, it is its new holder's.
    {
      UniqueFd old(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
      ifreq ifr{};
      std::strncpy(ifr.ifr_name, "vif9.2", IFNAMSIZ - 1);
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
      ASSERT_EQ(::ioctl(old.get(), TUNSETIFF, &ifr), 0) << std::strerror(errno);
      ASSERT_EQ(::ioctl(old.get(), TUNSETPERSIST, 1UL), 0);
    }
    const unsigned idx = ::if_nametoindex("vif9.2");
    ASSERT_NE(idx, 0u);
    TapConfig cfg = offload_config("vif9.2");
    cfg.multi_queue = true;
    auto adopted = TapDevice::attach(static_cast<int>(idx), cfg);
    ASSERT_TRUE(adopted) << adopted.error().message();
    expect_refused("vif9.2", true);
  });
}

// Whether the kernel reports carrier on the interface (IFF_LOWER_UP; `ip` prints NO-CARRIER
// for an interface that is up without it).
bool has_carrier(const std::string& dev) {
  return sh("ip -o link show " + dev + " | grep -q LOWER_UP");
}

// Sends one plain frame into the TAP from the host side (as the bridge would).
void send_from_host(int ifindex, const std::vector<std::byte>& frame) {
  const auto pkt = test::PacketSocket::open(ifindex);
  ASSERT_TRUE(pkt.valid()) << std::strerror(errno);
  ASSERT_TRUE(pkt.send(frame)) << std::strerror(errno);
}

// A daemon's restart with systemd's fd store: the TAP's queue fds stay open in the service
// manager while no daemon runs. The kernel then neither detaches the queues nor turns the
// carrier off (which would take the bridge port down and flush dom0's ARP entry for the guest),
// and the next daemon's attach() takes those very queues, with what the host sent meanwhile.
// Without the kept fds the carrier goes off: what unetbackd's restarts looked like before.
TEST(TapDeviceNetns, QueuesKeptOpenElsewhereKeepTheCarrierAndWhatTheHostSentForTheNextOwner) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    TapConfig cfg = offload_config("vif8.0");
    cfg.offloads = {};
    cfg.multi_queue = true;
    cfg.queues = 2;
    auto tap = TapDevice::create(cfg);
    ASSERT_TRUE(tap) << tap.error().message();
    ASSERT_FALSE(tap->set_persistent(true));
    ASSERT_FALSE(tap->set_up(true));
    ASSERT_FALSE(tap->set_active_queues(1));  // a 1-queue guest: queue 1 detached
    const int idx = tap->ifindex();
    ASSERT_TRUE(has_carrier("vif8.0"));
    // The service manager's copies (FDSTORE=1 sends dups of the same open files).
    std::vector<UniqueFd> kept;
    for (int fd : tap->queue_fds()) kept.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    ASSERT_EQ(kept.size(), 2u);
    // The daemon goes (its own fds close; the TAP stays, as after a SIGKILL).
    tap->keep_for_successor();
    tap = errno_code(EIO);
    EXPECT_TRUE(has_carrier("vif8.0")) << "queues held open elsewhere: the carrier stays on";

    FrameSpec spec;
    spec.dst_mac = kTapMac;
    spec.src_mac = kPeerMac;
    spec.src_ipv4 = {10, 8, 0, 1};
    spec.dst_ipv4 = {10, 8, 0, 2};
    spec.payload_len = 100;
    const auto frame = build_frame(spec);
    send_from_host(idx, frame);

    auto next = TapDevice::attach(idx, cfg, std::move(kept));
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_TRUE(next->from_kept_fds());
    EXPECT_EQ(next->queue_count(), 2u);
    std::vector<std::byte> buf(sizeof(virtio_net_hdr) + 2048);
    bool seen = false;
    for (int tries = 0; tries < 20 && !seen; ++tries) {  // IPv6 autoconf chatter may come first
      if (!wait_readable(next->fd())) break;
      auto n = next->read(buf);
      ASSERT_TRUE(n) << n.error().message();
      const std::size_t hdr = next->vnet_hdr_len();
      seen = *n == hdr + frame.size() &&
             std::memcmp(buf.data() + hdr, frame.data(), frame.size()) == 0;
    }
    EXPECT_TRUE(seen) << "the frame the host sent while no daemon ran waits in the kept queue";
    {
      auto q1 = next->queue_fd(1);  // the detached queue attaches again
      ASSERT_TRUE(q1) << q1.error().message();
    }

    // Nobody holds them: the last close detaches the last queue and the carrier goes off.
    next->keep_for_successor();
    next = errno_code(EIO);
    EXPECT_FALSE(has_carrier("vif8.0")) << "no queue left: carrier off";
    // Fds of another TAP are not taken: new queues are opened instead.
    TapConfig other_cfg = cfg;
    other_cfg.name = "vif9.0";
    auto other = TapDevice::create(other_cfg);
    ASSERT_TRUE(other) << other.error().message();
    std::vector<UniqueFd> wrong;
    for (int fd : other->queue_fds()) wrong.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    auto fresh = TapDevice::attach(idx, cfg, std::move(wrong));
    ASSERT_TRUE(fresh) << fresh.error().message();
    EXPECT_FALSE(fresh->from_kept_fds());
    EXPECT_EQ(fresh->name(), "vif8.0");
  });
}

TEST(TapDeviceNetns, AttachingCreatesNothingWhereNoPersistentTapIs) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    TapConfig cfg = offload_config("vif8.0");
    EXPECT_EQ(TapDevice::attach(4242, cfg).error(), std::errc::no_such_device);
    auto plain = TapDevice::create(cfg);  // alive, not persistent
    ASSERT_TRUE(plain);
    const int idx = plain->ifindex();
    plain = errno_code(EIO);  // closed: gone
    EXPECT_EQ(TapDevice::attach(idx, cfg).error(), std::errc::no_such_device);
    ASSERT_TRUE(sh("ip link add br8 type bridge"));
    EXPECT_FALSE(TapDevice::attach(static_cast<int>(::if_nametoindex("br8")), cfg)) << "not a TAP";
    EXPECT_EQ(::if_nametoindex("vif8.0"), 0u);
    (void)sh("ip link del br8");
  });
}

TEST(TapDeviceNetns, NonBlockingReadOnAQuietTapIsEagain) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    TapConfig cfg = offload_config("vif4.0");
    auto tap = TapDevice::create(cfg);
    ASSERT_TRUE(tap) << tap.error().message();
    std::vector<std::byte> buf(2048);
    auto r = tap->read(buf);  // down: the kernel sends nothing
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
  });
}

// Guest TX direction, plain: a frame built with full checksums and a zero vnet header is
// verified by the kernel's UDP receive path, so a wrong checksum is dropped and a right one
// delivered. This checks our checksum code against the kernel's.
TEST(TapDeviceNetns, KernelAcceptsBuiltChecksumsAndDropsABrokenOne) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    auto tap = TapDevice::create(offload_config("vif5.0"));
    ASSERT_TRUE(tap) << tap.error().message();
    ASSERT_FALSE(tap->set_up(true));
    ASSERT_TRUE(sh("ip addr add 10.0.0.1/24 dev vif5.0")) << "ip addr add failed";

    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(5201);
    addr.sin_addr.s_addr = htonl(0x0A000001);
    ASSERT_EQ(::bind(udp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);

    FrameSpec spec;
    spec.dst_mac = kTapMac;
    spec.src_mac = kPeerMac;
    spec.src_ipv4 = {10, 0, 0, 2};
    spec.dst_ipv4 = {10, 0, 0, 1};
    spec.l4 = L4Proto::udp;
    spec.dst_port = 5201;
    spec.payload_len = 333;
    auto good = build_frame(spec);
    auto bad = good;
    bad.back() ^= std::byte{0x40};  // payload changed, checksum not

    VirtioNetHdr none{};
    for (auto* frame : {&bad, &good}) {
      const iovec iov[] = {{&none, sizeof none}, {frame->data(), frame->size()}};
      auto w = tap->write(iov);
      ASSERT_TRUE(w) << w.error().message();
      EXPECT_EQ(*w, sizeof none + frame->size());
    }
    ASSERT_TRUE(wait_readable(udp.get()));
    std::vector<std::byte> got(2048);
    const ssize_t n = ::recv(udp.get(), got.data(), got.size(), MSG_DONTWAIT);
    ASSERT_EQ(n, 333);
    // The first datagram delivered is the good one (payload intact): the bad one was dropped.
    EXPECT_EQ(std::memcmp(got.data(), good.data() + 42, 333), 0);
    EXPECT_LT(::recv(udp.get(), got.data(), got.size(), MSG_DONTWAIT), 0);
  });
}

// Guest TX direction with offloads: a GSO TCPv4 super-frame with the header prepare_guest_tx
// made is accepted by the TAP and seen, still one super-frame with the same GSO metadata, by
// an AF_PACKET socket with PACKET_VNET_HDR bound to the TAP.
TEST(TapDeviceNetns, GsoFrameWrittenToTheTapKeepsItsVnetHdr) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    auto tap = TapDevice::create(offload_config("vif6.0"));
    ASSERT_TRUE(tap) << tap.error().message();
    ASSERT_FALSE(tap->set_up(true));

    const auto pkt = test::PacketSocket::open(tap->ifindex(), /*vnet_hdr=*/true);
    ASSERT_TRUE(pkt.valid()) << std::strerror(errno);

    FrameSpec spec;
    spec.dst_mac = kTapMac;
    spec.src_mac = kPeerMac;
    spec.src_ipv4 = {10, 9, 0, 2};
    spec.dst_ipv4 = {10, 9, 0, 3};  // not ours: the stack drops it after the packet tap
    spec.tcp_options_len = 12;
    spec.payload_len = 20000;
    spec.checksum = L4ChecksumMode::zero;  // GSO without csum_blank: checksum_setup rule
    auto frame = build_frame(spec);
    auto hdr = prepare_guest_tx(GuestTxOffload{{}, GsoInfo{wire::GsoType::tcpv4, 1448}}, frame,
                                frame.size());
    ASSERT_TRUE(hdr) << hdr.error().message();

    const iovec iov[] = {{&*hdr, sizeof *hdr}, {frame.data(), frame.size()}};
    auto w = tap->write(iov);
    ASSERT_TRUE(w) << w.error().message();

    std::vector<std::byte> buf(sizeof(virtio_net_hdr) + 70000);
    for (int tries = 0; tries < 20; ++tries) {  // skip IPv6 autoconf chatter, if any
      ASSERT_TRUE(wait_readable(pkt.get()));
      const ssize_t n = ::recv(pkt.get(), buf.data(), buf.size(), 0);
      ASSERT_GT(n, 0);
      if (static_cast<std::size_t>(n) != sizeof(virtio_net_hdr) + frame.size()) continue;
      virtio_net_hdr seen{};
      std::memcpy(&seen, buf.data(), sizeof seen);
      EXPECT_EQ(seen.gso_type & ~VIRTIO_NET_HDR_GSO_ECN, VIRTIO_NET_HDR_GSO_TCPV4);
      EXPECT_EQ(seen.gso_size, 1448);
      EXPECT_EQ(seen.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_F_NEEDS_CSUM);
      EXPECT_EQ(seen.csum_start, 34);
      EXPECT_EQ(seen.csum_offset, 16);
      EXPECT_EQ(std::memcmp(buf.data() + sizeof seen, frame.data(), frame.size()), 0);
      return;
    }
    ADD_FAILURE() << "the GSO frame never showed up on the packet socket";
  });
}

// Guest RX direction: a UDP datagram sent from a socket in the namespace leaves through the
// TAP with a partial checksum (TUN_F_CSUM); for a frontend without checksum offload we
// complete it, and the result verifies.
TEST(TapDeviceNetns, UdpFromTheStackArrivesPartialAndIsCompletedForAFrontendWithoutOffload) {
  SKIP_UNLESS_ROOT_AND_TUN();
  IN_NEW_NETNS([] {
    auto tap = TapDevice::create(offload_config("vif7.0"));
    ASSERT_TRUE(tap) << tap.error().message();
    ASSERT_FALSE(tap->set_up(true));
    ASSERT_TRUE(sh("ip addr add 10.0.0.1/24 dev vif7.0"));
    ASSERT_TRUE(sh("ip neigh add 10.0.0.2 lladdr " + format_mac(kPeerMac) + " dev vif7.0"));

    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(0x0A000002);
    const std::string payload(1001, 'x');
    ASSERT_EQ(::sendto(udp.get(), payload.data(), payload.size(), 0,
                       reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(payload.size()));

    std::vector<std::byte> buf(tap->vnet_hdr_len() + 70000);
    for (int tries = 0; tries < 20; ++tries) {  // skip IPv6 autoconf chatter
      ASSERT_TRUE(wait_readable(tap->fd()));
      auto n = tap->read(buf);
      ASSERT_TRUE(n) << n.error().message();
      auto hdr = load_vnet_hdr(buf);
      ASSERT_TRUE(hdr);
      std::span<std::byte> frame = std::span(buf).subspan(12, *n - 12);
      auto info = parse_headers(frame);
      if (!info || !info->is_ipv4() || info->l4_proto != kIpProtoUdp) continue;

      EXPECT_EQ(hdr->hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_F_NEEDS_CSUM);
      FrontendOffloads with_offload{.csum_ipv4 = true};
      auto as_is = map_tap_rx(*hdr, with_offload, frame, frame.size());
      ASSERT_TRUE(as_is);
      EXPECT_EQ(as_is->flags, wire::RxFlag::csum_blank | wire::RxFlag::data_validated);

      FrontendOffloads no_offload{.csum_ipv4 = false};
      auto rx = map_tap_rx(*hdr, no_offload, frame, frame.size());
      ASSERT_TRUE(rx) << rx.error().message();
      ASSERT_TRUE(rx->complete_checksum);
      EXPECT_EQ(rx->csum_start, 34);
      EXPECT_EQ(rx->csum_offset, 6);
      EXPECT_FALSE(*verify_l4_checksum(frame));  // only the pseudo-header sum so far
      const std::span<std::byte> frags[] = {frame.first(40), frame.subspan(40)};
      ASSERT_FALSE(complete_checksum(frags, rx->csum_start, rx->csum_offset));
      EXPECT_TRUE(*verify_l4_checksum(frame));
      return;
    }
    ADD_FAILURE() << "the UDP datagram never came out of the TAP";
  });
}

}  // namespace
}  // namespace unetback::net
