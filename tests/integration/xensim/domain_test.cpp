// Domain lifecycle through xensim: registration, toolstack create + claim, death by exit or
// DESTROY_DOMAIN, and what xenstored and event channels show of it.
#include <chrono>
#include <gtest/gtest.h>
#include <memory>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/event_wait.hpp"
#include "tests/integration/xensim/xensim_process.hpp"

namespace unetback::test {
namespace {

using namespace std::chrono_literals;

hv::HypervisorOptions backend_opts() {
  hv::HypervisorOptions o;
  o.role = hv::Role::backend;
  return o;
}

/// A domU child: registers (or claims `claim`), offers dom0 a port, says
/// "<domid> <port>", then waits for any line and exits.
int domu_main(int ctrl, const std::string& dir, std::optional<DomId> claim) {
  hv::HypervisorOptions o;
  o.role = hv::Role::frontend;
  o.name = "victim";
  o.domid = claim;
  hv::SimHypervisor hv(dir, o);
  auto ch = hv.open_event_channel();
  auto port = ch->bind_unbound(kDom0);
  if (!port) return 10;
  send_line(ctrl, std::to_string(hv.self().value()) + " " + std::to_string(port->value()));
  (void)recv_line(ctrl, 60s);
  return 0;
}

std::pair<DomId, Port> parse_hello(const std::optional<std::string>& line) {
  std::istringstream in(line.value_or(""));
  unsigned d = 0, p = 0;
  in >> d >> p;
  return {DomId{static_cast<std::uint16_t>(d)}, Port{p}};
}

/// Reads watch events until one for `path` arrives; false after `timeout`.
bool wait_watch(hv::XenStore& xs, const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    while (auto ev = xs.read_watch())
      if (ev->path == path) return true;
    pollfd p{xs.watch_fd(), POLLIN, 0};
    (void)::poll(&p, 1, 20);
  }
  return false;
}

bool wait_gone(hv::SimHypervisor& dom0, DomId d) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;  // a guard against a hang
  while (dom0.domain_exists(d)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(DomainLifecycle, KilledDomUFiresReleaseDomainAndItsPortsGoAway) {
  XensimProcess world;
  const std::string dir = world.dir();
  ChildProcess child([dir](int ctrl) { return domu_main(ctrl, dir, std::nullopt); });
  const auto [domu, offered] = parse_hello(child.recv());
  ASSERT_NE(domu, kDom0);

  hv::SimHypervisor dom0(dir, backend_opts());
  EXPECT_TRUE(dom0.domain_exists(domu));
  auto xs = dom0.open_xenstore();
  ASSERT_FALSE(xs->watch("@releaseDomain", "rel"));
  ASSERT_TRUE(wait_watch(*xs, "@releaseDomain", 30s));  // the initial event
  EXPECT_EQ(xs->read("/local/domain/" + std::to_string(domu.value()) + "/name").value_or(""),
            "victim");
  auto ch = dom0.open_event_channel();
  auto local = ch->bind_interdomain(domu, offered);
  ASSERT_TRUE(local) << local.error().message();
  ASSERT_FALSE(ch->notify(*local));  // caches the peer

  ::kill(child.pid(), SIGKILL);
  ASSERT_TRUE(child.wait());
  EXPECT_TRUE(wait_watch(*xs, "@releaseDomain", 30s));
  EXPECT_TRUE(wait_gone(dom0, domu));
  // Our end is unbound now: notify succeeds and goes nowhere; the domain cannot be bound.
  EXPECT_FALSE(ch->notify(*local));
  EXPECT_EQ(ch->bind_interdomain(domu, offered).error(), std::errc::no_such_process);
  struct stat st {};
  EXPECT_NE(::stat((dir + "/dom" + std::to_string(domu.value()) + ".sock").c_str(), &st), 0)
      << "the dead domain's xenstore socket should be gone";
}

TEST(DomainLifecycle, ToolstackCreatesDomainThatAProcessClaims) {
  XensimProcess world;
  const std::string dir = world.dir();
  hv::SimHypervisor dom0(dir, backend_opts());
  auto id = dom0.create_domain("guest1");
  ASSERT_TRUE(id) << id.error().message();
  EXPECT_NE(*id, kDom0);
  EXPECT_TRUE(dom0.domain_exists(*id));
  EXPECT_EQ(dom0.create_domain("guest1").error(), std::errc::file_exists);

  const DomId want = *id;
  ChildProcess child([dir, want](int ctrl) { return domu_main(ctrl, dir, want); });
  const auto [claimed, port] = parse_hello(child.recv());
  EXPECT_EQ(claimed, want);

  // A second process cannot run the same domain.
  hv::HypervisorOptions o;
  o.role = hv::Role::frontend;
  o.domid = want;
  EXPECT_THROW(hv::SimHypervisor(dir, o), SetupError);

  ASSERT_FALSE(dom0.destroy_domain(want));
  auto st = child.wait(30s);
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL);
  EXPECT_FALSE(dom0.domain_exists(want));
  EXPECT_EQ(dom0.destroy_domain(want), std::errc::no_such_process);
}

// A backend outside dom0 (unetbackd --backend-domid N) joins a driver domain: any number of
// them, none of them running it; an ordinary domain refuses them, and a backend leaving does
// not end the driver domain.
TEST(DomainLifecycle, BackendsJoinADriverDomainButNoOtherDomain) {
  XensimProcess world;
  const std::string dir = world.dir();
  hv::SimHypervisor dom0(dir, backend_opts());
  auto plain = dom0.create_domain("plain");
  auto driver = dom0.create_domain("netdd", 0, /*driver_domain=*/true);
  ASSERT_TRUE(plain && driver);
  hv::HypervisorOptions o = backend_opts();
  o.domid = *plain;
  try {
    hv::SimHypervisor refused(dir, o);
    ADD_FAILURE() << "a backend joined an ordinary domain";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("driver domain"), std::string::npos) << e.what();
  }
  o.domid = *driver;
  {
    hv::SimHypervisor first(dir, o);
    hv::SimHypervisor second(dir, o);
    EXPECT_EQ(first.self(), *driver);
    EXPECT_EQ(second.self(), *driver);
  }
  // Both left: the driver domain lives on until the toolstack destroys it.
  EXPECT_TRUE(dom0.domain_exists(*driver));
  ASSERT_FALSE(dom0.destroy_domain(*driver));
  EXPECT_FALSE(dom0.domain_exists(*driver));
}

TEST(DomainLifecycle, CreatedDomainIsIntroducedToXenstore) {
  XensimProcess world;
  hv::SimHypervisor dom0(world.dir(), backend_opts());
  auto id = dom0.create_domain("guest2");
  ASSERT_TRUE(id);
  auto xs = dom0.open_xenstore();
  const std::string base = "/local/domain/" + std::to_string(id->value());
  EXPECT_EQ(xs->read(base + "/name").value_or(""), "guest2");
  struct stat st {};
  EXPECT_EQ(::stat((world.dir() + "/dom" + std::to_string(id->value()) + ".sock").c_str(), &st), 0);
  // Destroying a domain nobody runs releases it too.
  ASSERT_FALSE(dom0.destroy_domain(*id));
  EXPECT_FALSE(dom0.domain_exists(*id));
}

TEST(DomainLifecycle, DomUCannotUseDom0Operations) {
  XensimProcess world;
  hv::HypervisorOptions o;
  o.role = hv::Role::frontend;
  o.name = "plain";
  hv::SimHypervisor domu(world.dir(), o);
  EXPECT_EQ(domu.create_domain("sneaky").error(), std::errc::operation_not_permitted);
  EXPECT_EQ(domu.destroy_domain(kDom0), std::errc::operation_not_permitted);
  EXPECT_EQ(domu.inject_stall(kDom0, true), std::errc::operation_not_permitted);
  EXPECT_THROW((void)domu.grant_table(), SetupError);
}

TEST(DomainLifecycle, OpeningWithoutXensimNamesTheSocket) {
  try {
    hv::SimHypervisor hv("/nonexistent-xensim-world", backend_opts());
    FAIL() << "expected SetupError";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-xensim-world/hv.sock"), std::string::npos)
        << e.what();
  }
}

TEST(DomainLifecycle, SecondXensimOnTheSameDirectoryRefusesToStart) {
  XensimProcess world;
  const std::string cmd = xensim_binary() + " --dir " + world.dir() + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  // and the first one still serves, xenstored included
  hv::SimHypervisor dom0(world.dir(), backend_opts());
  EXPECT_TRUE(dom0.domain_exists(kDom0));
  EXPECT_EQ(dom0.open_xenstore()->read("/local/domain/0/name").value_or(""), "Domain-0");
}

}  // namespace
}  // namespace unetback::test
