// The world of the netfront scenarios: a xensim process, dom0 (backend role) running the test's
// own TestBackend with the guest's vif device made, and one domU (frontend role, "netfront")
// for the Netfront under test, which each scenario connects as it needs.
#pragma once

#include <gtest/gtest.h>
#include <memory>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "frontend-shim/netfront.hpp"
#include "tests/integration/netfront/test_backend.hpp"
#include "tests/integration/xensim/xensim_process.hpp"

namespace unetback::test {

class NetfrontWorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = std::make_unique<XensimProcess>();
    hv::HypervisorOptions be;
    be.role = hv::Role::backend;
    dom0_ = std::make_unique<hv::SimHypervisor>(world_->dir(), be);
    hv::HypervisorOptions fe;
    fe.role = hv::Role::frontend;
    fe.name = "netfront";
    domu_ = std::make_unique<hv::SimHypervisor>(world_->dir(), fe);
    backend_ = std::make_unique<TestBackend>(*dom0_, domu_->self());
    backend_->create_device();
  }
  void TearDown() override {
    nf_.reset();
    backend_.reset();
    domu_.reset();
    dom0_.reset();
  }

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_, domu_;
  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<netfront::Netfront> nf_;
};

}  // namespace unetback::test
