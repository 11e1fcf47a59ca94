// A backend killed at any point of a pass leaves rings that its successor settles from the vif's
// record (vif_record.hpp): every request the frontend posted is answered exactly once, a
// response the dead backend wrote but did not push is pushed and never read back as a request,
// and no frame reaches the host twice.
//
// The "kill" is a fork(): at the chosen point of the pass the child freezes the ring page and
// the record exactly as the dead process would leave them (its copy of memory stops changing),
// recovers them as a successor does, serves the rest with a new TxPath/RxPath and checks what
// the frontend saw; the parent carries on, and kills again at the next point.
#include "backend/vif/vif_record.hpp"

#include <array>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <sched.h>
#include <set>
#include <string>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "backend/vif/mcast_filter.hpp"
#include "backend/vif/packet_pool.hpp"
#include "backend/vif/rx_path.hpp"
#include "backend/vif/tx_path.hpp"
#include "backend/vif/vif.hpp"
#include "backend/xenbus/keys.hpp"
#include "tests/support/in_memory_grant_table.hpp"

namespace unetback::vif {
namespace {

constexpr DomId kFrontend{5};
using test::InMemoryGrantTable;
using test::Page;

/// Runs `child` in a forked copy of this process; its exit status 0 is success, anything else
/// (with the message it printed) a failure.
void in_crashed_copy(const std::string& where, const std::function<std::string()>& child) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string why = child();
    if (!why.empty()) std::fprintf(stderr, "killed %s: %s\n", where.c_str(), why.c_str());
    std::_Exit(why.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "killed " << where;
}

class HookSink final : public PacketSink {
 public:
  std::error_code deliver(const net::VirtioNetHdr&, std::span<const iovec> frame) override {
    if (on_deliver) on_deliver();
    // The fill byte says which packet this is.
    delivered.push_back(std::to_integer<int>(static_cast<const std::byte*>(frame[0].iov_base)[0]));
    return {};
  }
  std::function<void()> on_deliver;
  std::vector<int> delivered;
};

struct TxWorld {
  InMemoryGrantTable table;
  Page page{};
  TxRingRecord rec{};
  ring::TxFrontRing front = ring::TxFrontRing::init(page.bytes);
  std::map<std::uint16_t, int> posted;  // request id -> packet number (-1: a frag)
  int packets = 0;
  std::uint16_t next_id = 0;
  std::uint32_t next_ref = 0;

  /// A packet of `len` bytes (2 slots past 4096), filled with its number; `len` < 14 is a runt
  /// the backend drops (answered ERROR at once, in the middle of a pass).
  void post(std::uint32_t len) {
    const int n = packets++;
    const std::uint32_t first = std::min<std::uint32_t>(len, 4096);
    wire::TxRequest r{};
    r.gref = next_ref++;
    r.size = static_cast<std::uint16_t>(len);
    r.id = next_id++;
    r.flags = len > first ? NETTXF_more_data : 0;
    std::memset(table.page(GrantRef{r.gref}), n, first);
    front.put_request(r);
    posted[r.id] = n;
    if (len > first) {
      wire::TxRequest f{};
      f.gref = next_ref++;
      f.size = static_cast<std::uint16_t>(len - first);
      f.id = next_id++;
      std::memset(table.page(GrantRef{f.gref}), n, len - first);
      front.put_request(f);
      posted[f.id] = -1;
    }
  }

  /// The successor: recovery, then a new TxPath serves what is left. "" when the frontend saw
  /// every request answered once and no packet delivered twice.
  std::string recover_and_check(const std::vector<int>& delivered_before) {
    auto r = recover_tx_ring(page.bytes, rec);
    if (!r) return "recovery refused: " + r.error().message();
    auto back = ring::TxBackRing::attach(page.bytes);
    if (!back) return "attach refused";
    reset_ring_record(rec, back->req_cons());
    HookSink sink;
    QueueCounters counters;
    TxConfig cfg;
    cfg.frontend = kFrontend;
    cfg.map_mode = zerocopy::MapMode::never;
    cfg.recorder = TxRecorder(&rec);
    TxPath tx(*back, table, sink, cfg, counters);
    while (tx.process(std::chrono::steady_clock::now()).more) {
    }
    std::multiset<std::uint16_t> answered;
    while (front.unconsumed_responses() > 0) {
      const auto rsp = front.take_response();
      if (rsp.status == NETIF_RSP_NULL) continue;
      answered.insert(rsp.id);
    }
    for (const auto& [id, n] : posted) {
      if (answered.count(id) != 1) {
        return "id " + std::to_string(id) + " answered " + std::to_string(answered.count(id)) +
               " times";
      }
    }
    if (answered.size() != posted.size()) return "answers for ids never posted";
    std::multiset<int> frames(delivered_before.begin(), delivered_before.end());
    frames.insert(sink.delivered.begin(), sink.delivered.end());
    for (const int f : frames)
      if (frames.count(f) != 1) return "packet " + std::to_string(f) + " delivered twice";
    return {};
  }
};

TEST(TxRecovery, ABackendKilledAnywhereInAPassLeavesEveryRequestAnsweredOnce) {
  // Each kill point is a fresh world: the parent serves a pass and is "killed" at one point.
  for (int kill_at = 0; kill_at < 40; ++kill_at) {
    TxWorld w;
    // Runts among good packets: their ERROR responses are written at once, while the
    // following packets are still being delivered (written, not pushed).
    const std::array<std::uint32_t, 6> sizes{1000, 10, 6000, 1500, 10, 64};
    for (int i = 0; i < 30; ++i) w.post(sizes[i % sizes.size()]);
    (void)w.front.push_requests();
    auto back = ring::TxBackRing::attach(w.page.bytes);
    ASSERT_TRUE(back);
    reset_ring_record(w.rec, back->req_cons());
    HookSink sink;
    QueueCounters counters;
    TxConfig cfg;
    cfg.frontend = kFrontend;
    cfg.map_mode = zerocopy::MapMode::never;
    cfg.max_packets_per_pass = 8;  // several passes, pushes in between
    cfg.recorder = TxRecorder(&w.rec);
    TxPath tx(*back, w.table, sink, cfg, counters);
    int point = 0;
    bool killed = false;
    auto maybe_kill = [&](const std::string& where) {
      if (killed || point++ != kill_at) return;
      killed = true;
      in_crashed_copy(where + " #" + std::to_string(kill_at),
                      [&] { return w.recover_and_check(sink.delivered); });
    };
    sink.on_deliver = [&] { maybe_kill("delivering"); };
    for (;;) {
      const auto pass = tx.process(std::chrono::steady_clock::now());
      maybe_kill("after a pass");
      if (!pass.more) break;
    }
    if (!killed) {
      maybe_kill("at the end");
      if (!killed)
        in_crashed_copy("at the end", [&] { return w.recover_and_check(sink.delivered); });
      break;  // every point of this traffic was tried
    }
  }
}

TEST(TxRecovery, ARecordThatDoesNotAddUpIsRefusedAndNothingIsWritten) {
  TxWorld w;
  w.post(1000);
  (void)w.front.push_requests();
  auto back = ring::TxBackRing::attach(w.page.bytes);
  ASSERT_TRUE(back);
  reset_ring_record(w.rec, back->req_cons());
  w.rec.req_cons = 300;  // more consumed than the ring holds past rsp_prod_pvt
  const Page before = w.page;
  EXPECT_EQ(recover_tx_ring(w.page.bytes, w.rec).error(), std::errc::protocol_error);
  EXPECT_EQ(std::memcmp(before.bytes, w.page.bytes, sizeof(Page)), 0);
  // A slot the record says was consumed at another index (a stale or foreign record).
  reset_ring_record(w.rec, RingIdx{0});
  w.rec.req_cons = 1;
  w.rec.slots[0].idx = 77;
  EXPECT_EQ(recover_tx_ring(w.page.bytes, w.rec).error(), std::errc::protocol_error);
}

TEST(RxRecovery, ABackendKilledBeforeItPushedReturnsEveryConsumedBufferOnce) {
  for (int kill_at = 0; kill_at < 40; ++kill_at) {
    InMemoryGrantTable table;
    Page page{};
    RxRingRecord rec{};
    auto front = ring::RxFrontRing::init(page.bytes);
    std::set<std::uint16_t> posted;
    for (std::uint16_t id = 0; id < 200; ++id) {
      front.put_request(wire::RxRequest{id, 0, id});
      posted.insert(id);
    }
    (void)front.push_requests();
    auto back = ring::RxBackRing::attach(page.bytes);
    ASSERT_TRUE(back);
    reset_ring_record(rec, back->req_cons());
    QueueCounters counters;
    RxConfig cfg;
    cfg.frontend = kFrontend;
    cfg.max_packets_per_pass = 8;
    cfg.recorder = RxRecorder(&rec);
    RxPath rx(*back, table, cfg, counters);
    PacketPool pool(64);  // the frames' bytes (never given back: 30 packets)
    int point = 0;
    bool killed = false;
    auto check = [&]() -> std::string {
      auto r = recover_rx_ring(page.bytes, rec);
      if (!r) return "recovery refused: " + r.error().message();
      std::multiset<std::uint16_t> back_ids;
      while (front.unconsumed_responses() > 0) back_ids.insert(front.take_response().id);
      // Whatever was consumed came back (data or ERROR); the rest is still posted.
      auto again = ring::RxBackRing::attach(page.bytes);
      if (!again) return "attach refused";
      for (const auto id : back_ids) {
        if (back_ids.count(id) != 1 || !posted.contains(id)) return "id answered twice or unknown";
      }
      const std::uint32_t outstanding = again->unconsumed_requests();
      if (back_ids.size() + outstanding != posted.size()) {
        return std::to_string(back_ids.size()) + " returned + " + std::to_string(outstanding) +
               " still posted != " + std::to_string(posted.size());
      }
      return {};
    };
    auto maybe_kill = [&](const std::string& where) {
      if (killed || point++ != kill_at) return;
      killed = true;
      in_crashed_copy(where + " #" + std::to_string(kill_at), check);
    };
    // Every release runs after its pass's copies and before the pass's responses are
    // published: a kill there leaves responses written but not pushed.
    auto release = [&] { maybe_kill("responses written, not pushed"); };
    for (int i = 0; i < 30; ++i) {
      const std::uint32_t len = i % 3 == 0 ? 9000 : 1500;  // 3 slots or 1
      const int buf = pool.take();
      ASSERT_GE(buf, 0);
      std::memset(pool.frame(buf), i, len);
      RxPacket p;
      p.frags[0] = RxFrag{hv::GrantCopyPtr::local(pool.frame(buf)), len};
      p.nr_frags = 1;
      p.len = len;
      p.release = RxRelease::calling(&release);
      ASSERT_TRUE(rx.enqueue(std::move(p), std::chrono::steady_clock::now()));
    }
    while (!rx.empty()) {
      (void)rx.process(std::chrono::steady_clock::now());
      maybe_kill("after a pass");
    }
    if (!killed) break;
  }
}

}  // namespace
}  // namespace unetback::vif

namespace unetback::vif {
namespace {

/// A scratch state directory, removed with everything in it.
struct StateDir {
  StateDir() {
    char tmpl[] = "/tmp/unetback-record-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~StateDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

// What a planned takeover reads instead of xenstore: the keys the vif's connect was made from,
// stored after the queues; the header still fits 64 bytes, and nothing else moves.
TEST(VifRecordKeys, TheConnectionsKeysComeBackFromTheRecordAsTheyWereWritten) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{1});
  const xenbus::KeySnapshot keys{{"/local/domain/7/device/vif/1/tx-ring-ref", "8"},
                                 {"/local/domain/7/device/vif/1/feature-split", std::nullopt},
                                 {"/local/domain/0/backend/vif/7/1/mac", "00:16:3e:00:00:01"}};
  const auto bytes = xenbus::encode_key_snapshot(keys, kRecordMaxKeysBytes);
  {
    auto rec = VifRecord::create(file, DomId{7}, DevId{1}, 2, 42, bytes);
    ASSERT_TRUE(rec);
    rec->queue(1).tx_ref = 99;
  }
  auto rec = VifRecord::open(file, DomId{7}, DevId{1});
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->header().version, kRecordVersion);
  EXPECT_EQ(rec->queue(1).tx_ref, 99U);
  EXPECT_EQ(xenbus::decode_key_snapshot(rec->keys()), keys);
  // A snapshot too big for the record is not kept at all (the successor reads xenstore).
  EXPECT_TRUE(xenbus::encode_key_snapshot(keys, bytes.size() - 1).empty());
  // Bytes cut short, or a presence byte that is neither 0 nor 1, are no snapshot.
  EXPECT_FALSE(xenbus::decode_key_snapshot(std::span(bytes).first(bytes.size() - 1)));
  auto bad = bytes;
  bad[2] = std::byte{7};
  EXPECT_FALSE(xenbus::decode_key_snapshot(bad));
}

// A daemon upgraded from a version that wrote version-1 records (no keys) still adopts their
// vifs: the record opens, with no keys, and the queues are where they were.
TEST(VifRecordKeys, AVersionOneRecordStillOpensWithNoKeys) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  {
    auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 1, 42);
    ASSERT_TRUE(rec);
    rec->queue(0).rx_ref = 77;
    rec->header().version = 1;
  }
  // Version 1: the header and the queues, nothing after them.
  std::filesystem::resize_file(file, sizeof(RecordHeader) + sizeof(QueueRecord));
  auto rec = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_TRUE(rec);
  EXPECT_TRUE(rec->keys().empty());
  EXPECT_EQ(rec->mcast(), nullptr);
  EXPECT_EQ(rec->queue(0).rx_ref, 77U);
  // A version this daemon does not know is refused (the vif reconnects instead).
  rec->header().version = kRecordVersion + 1;
  rec = VifRecord();
  const auto newer = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error(), std::errc::protocol_error);
}

xenbus::KeySnapshot connect_keys() {
  return {{"/local/domain/7/device/vif/0/tx-ring-ref", "8"},
          {"/local/domain/7/device/vif/0/xdp-headroom", "0"},
          {"/local/domain/0/backend/vif/7/0/rate", std::nullopt}};
}

// A version-2 record (an upgrade from the daemon that wrote it): its keys right after the
// queues, exactly as long as they are, and no multicast list.
TEST(VifRecordKeys, AVersionTwoRecordStillOpensWithItsKeysAndNoMulticastList) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  const auto bytes = xenbus::encode_key_snapshot(connect_keys(), kRecordMaxKeysBytes);
  RecordHeader h{};
  h.magic = kRecordMagic;
  h.version = 2;
  h.state = static_cast<std::uint32_t>(RecordState::handed_over);
  h.nr_queues = 1;
  h.domid = 7;
  h.ifindex = 42;
  h.keys_bytes = static_cast<std::uint32_t>(bytes.size());
  QueueRecord q{};
  q.rx_ref = 77;
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(reinterpret_cast<const char*>(&q), sizeof q);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  auto rec = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_TRUE(rec);
  EXPECT_EQ(xenbus::decode_key_snapshot(rec->keys()), connect_keys());
  EXPECT_EQ(rec->mcast(), nullptr);
  EXPECT_EQ(rec->queue(0).rx_ref, 77U);
}

// A value applied after the connect (here the guest's new XDP headroom) replaces the keys a
// successor takes the vif over with; keys that outgrow the record's room are dropped whole,
// and the successor reads xenstore instead of believing stale ones.
TEST(VifRecordKeys, AValueAppliedAfterTheConnectReplacesTheKeysAndOneTooLargeLeavesNone) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  {
    auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 1, 42,
                                 xenbus::encode_key_snapshot(connect_keys(), kRecordMaxKeysBytes));
    ASSERT_TRUE(rec);
    auto changed = connect_keys();
    changed[1].second = "256";
    changed[2].second = "10000000,50000";
    ASSERT_TRUE(rec->set_keys(xenbus::encode_key_snapshot(changed, kRecordMaxKeysBytes)));
  }
  {
    auto again = VifRecord::open(file, DomId{7}, DevId{0});
    ASSERT_TRUE(again);
    auto changed = connect_keys();
    changed[1].second = "256";
    changed[2].second = "10000000,50000";
    EXPECT_EQ(xenbus::decode_key_snapshot(again->keys()), changed);
    auto grown = connect_keys();
    grown[1].second = std::string(kRecordKeysSlack + 64, '9');
    EXPECT_FALSE(again->set_keys(xenbus::encode_key_snapshot(grown, kRecordMaxKeysBytes)));
  }
  auto rec = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_TRUE(rec);
  EXPECT_TRUE(rec->keys().empty());
}

// Every record is locked by the process that serves it, from create() or open() to its end: a
// successor (or a second daemon that got past the other claims) never settles the rings of a
// vif a live daemon still runs, nor deletes its record. Once the holder is gone, it opens.
TEST(VifRecordLock, ARecordALiveProcessServesIsNotOpenedAgainUntilItEnds) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 1, 42);
  ASSERT_TRUE(rec);
  const auto busy = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error(), std::errc::device_or_resource_busy);
  EXPECT_EQ(release_left_behind(dir.path, "/local/domain/0/backend/vif",
                                [](DomId, DevId) { return false; }),
            0U);
  EXPECT_TRUE(std::filesystem::exists(file)) << "a live process's record is not released";
  *rec = VifRecord();  // the serving process ends
  EXPECT_TRUE(VifRecord::open(file, DomId{7}, DevId{0}));
}

// The guest's multicast groups outlive the daemon in the record: what the filter held when the
// daemon died is what its successor's filter holds, so the guest (which sends its groups once)
// keeps its IPv6 neighbour discovery. A word that is no entry is skipped and counted.
TEST(VifRecordMcast, TheGroupsTheFilterHeldAreTheGroupsItsSuccessorHolds) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  const std::array<std::uint8_t, 6> nd{0x33, 0x33, 0xff, 0x00, 0x00, 0x01};
  const std::array<std::uint8_t, 6> mdns{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};
  const std::array<std::uint8_t, 6> left{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
  const auto as_dst = [](const std::array<std::uint8_t, 6>& m) {
    std::array<std::byte, 6> d{};
    for (std::size_t i = 0; i < 6; ++i) d[i] = std::byte{m[i]};
    return d;
  };
  {
    auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 1, 42);
    ASSERT_TRUE(rec);
    ASSERT_NE(rec->mcast(), nullptr);
    McastFilter f;
    ASSERT_TRUE(f.add(nd));  // before the record: mirror_to() copies it
    f.mirror_to(rec->mcast()->entries);
    ASSERT_TRUE(f.add(mdns));
    ASSERT_TRUE(f.add(left));
    f.remove(left);
    f.mirror_to(nullptr);
    ASSERT_TRUE(f.add(left));  // after the record was let go: not in it
  }
  auto rec = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_TRUE(rec);
  McastFilter successor;
  successor.set_enabled(true);
  EXPECT_EQ(successor.restore(rec->mcast()->entries), 0U);
  EXPECT_EQ(successor.size(), 2U);
  EXPECT_TRUE(successor.accepts(as_dst(nd)));
  EXPECT_TRUE(successor.accepts(as_dst(mdns)));
  EXPECT_FALSE(successor.accepts(as_dst(left)));
  rec->mcast()->entries[63] = 0xdead'0000'0000'0000ULL;
  McastFilter third;
  EXPECT_EQ(third.restore(rec->mcast()->entries), 1U);
  EXPECT_EQ(third.size(), 2U);
}

// A guest that went while no daemon ran leaves a record behind, whatever its device id: one
// above 65535 (the toolstack's ids are 32 bits) is released like any other, and a record of
// a vif in use is kept.
TEST(LeftBehindRecords, EveryRecordOfAVifNotInUseIsReleasedWhateverItsDeviceId) {
  const StateDir dir;
  for (const std::uint32_t devid : {0U, 65536U, 4000000000U}) {
    ASSERT_TRUE(VifRecord::create(VifRecord::path_for(dir.path, DomId{7}, DevId{devid}), DomId{7},
                                  DevId{devid}, 1, 0));
  }
  ASSERT_TRUE(VifRecord::create(VifRecord::path_for(dir.path, DomId{8}, DevId{70000}), DomId{8},
                                DevId{70000}, 1, 0));
  const auto in_use = [](DomId d, DevId) { return d == DomId{8}; };
  EXPECT_EQ(release_left_behind(dir.path, "/local/domain/0/backend/vif", in_use), 3U);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"vif-8-70000.state"});
}

// A record half made (a sparse file: what a daemon that died inside create() leaves, or one
// written by something else) is not adopted: storing into its hole on a full file system would
// raise SIGBUS in the successor. The vif reconnects instead.
TEST(VifRecordFullDisk, ARecordWithAHoleIsRefused) {
  const StateDir dir;
  const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
  {
    auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 4, 42);
    ASSERT_TRUE(rec);
  }
  ASSERT_TRUE(VifRecord::open(file, DomId{7}, DevId{0})) << "a whole record opens";
  // The same header, the rest of the file punched out.
  const auto size = std::filesystem::file_size(file);
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_GT(size, 2 * 4096U);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
                        static_cast<off_t>((size - 4096) / 4096 * 4096)),
            0);
  ::close(fd);
  const auto rec = VifRecord::open(file, DomId{7}, DevId{0});
  ASSERT_FALSE(rec);
  EXPECT_EQ(rec.error(), std::errc::protocol_error);
}

// A full state directory (a tmpfs of 64 KiB, filled) costs the vif its record and nothing
// else: create() says ENOSPC and leaves no file, where a sparse record used to map fine and
// raise SIGBUS at its first store, ending the daemon. Run in a child with its own user and
// mount namespaces, so that no root is needed and the mount goes with the child.
TEST(VifRecordFullDisk, CreatingARecordInAFullStateDirectoryIsENOSPCNotSIGBUS) {
  const StateDir dir;  // the mount point, made (and removed) outside the namespaces
  std::fflush(nullptr);
  int pipefd[2];
  ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    const auto say = [&](const std::string& what, int code) {
      (void)!::write(pipefd[1], what.data(), what.size());
      std::_Exit(code);
    };
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) say("unshare: no user namespaces here", 77);
    // This user as root of the new namespace (files made in the tmpfs need a mapped owner).
    const auto put = [](const char* path, const std::string& text) {
      const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      const bool ok =
          fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      if (fd >= 0) ::close(fd);
      return ok;
    };
    if (!put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !put("/proc/self/setgroups", "deny") ||
        !put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n"))
      say(std::string("uid/gid map: ") + std::strerror(errno), 77);
    if (::mount("none", dir.path.c_str(), "tmpfs", 0, "size=64k") != 0)
      say(std::string("mount tmpfs: ") + std::strerror(errno), 77);
    // Fill it.
    const std::string filler = dir.path / "filler";
    const int f = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    std::array<char, 4096> block{};
    while (::write(f, block.data(), block.size()) > 0) {
    }
    ::close(f);
    const auto file = VifRecord::path_for(dir.path, DomId{7}, DevId{0});
    auto rec = VifRecord::create(file, DomId{7}, DevId{0}, 4, 42);  // reached only without SIGBUS
    std::string out;
    if (rec) {
      out = "created a record in a full directory";
    } else if (rec.error() != std::errc::no_space_on_device) {
      out = "error " + rec.error().message();
    } else if (std::filesystem::exists(file)) {
      out = "ENOSPC, but the file is left behind";
    }
    say(out, out.empty() ? 0 : 1);  // the mount ends with the child's namespace
  }
  ::close(pipefd[1]);
  std::string why;
  std::array<char, 256> buf{};
  ssize_t n = 0;
  while ((n = ::read(pipefd[0], buf.data(), buf.size())) > 0) why.append(buf.data(), n);
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << why;
  ASSERT_FALSE(WIFSIGNALED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << why;
}

}  // namespace
}  // namespace unetback::vif
