#include <ringpipe/topology.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace ringpipe;
using ringpipe::testing::is_pocl;
using ringpipe::testing::is_rusticl;

namespace {

// ctest runs each suite below in the environment its name says.

TEST(OnePocl, ReportsPersistentModesAndWorkerBudget) {
  const auto topo = topology::discover();
  ASSERT_EQ(topo.size(), 1u) << "POCL_DEVICES=pthread and no rusticl: one device expected";
  const auto& d = topo[0];
  ASSERT_TRUE(is_pocl(d));
  const auto& i = d.info();
  EXPECT_EQ(i.type, device_type::cpu);
  EXPECT_GE(i.opencl_major, 3);
  EXPECT_TRUE(i.svm.fine_buffer);
  EXPECT_TRUE(i.svm.atomics);
  EXPECT_TRUE(i.c11_atomics);
  EXPECT_TRUE(i.supports(kernel_mode::persistent));
  EXPECT_TRUE(i.supports(kernel_mode::parked));
  EXPECT_TRUE(i.supports(kernel_mode::batched));
  EXPECT_GT(i.compute_units, 0u);
  EXPECT_EQ(i.persistent_budget, i.compute_units) << "PoCL: one worker thread per compute unit";
  EXPECT_GT(i.global_memory, 0u);
  EXPECT_GT(i.max_work_group_size, 0u);
  EXPECT_EQ(topo.link(0, 0), link_kind::direct);
}

TEST(TwoPocl, SharedSvmGivesDirectLinksAndOneWorkerPool) {
  const auto topo = topology::discover();
  ASSERT_EQ(topo.size(), 2u) << "POCL_DEVICES='pthread pthread' expected";
  ASSERT_TRUE(is_pocl(topo[0]) && is_pocl(topo[1]));
  EXPECT_TRUE(topo[0].shares_context_with(topo[1]));
  EXPECT_EQ(topo.link(0, 1), link_kind::direct);
  EXPECT_EQ(topo.link(1, 0), link_kind::direct);
  EXPECT_EQ(topo[0].info().budget_pool, topo[1].info().budget_pool);
  EXPECT_EQ(&topo[0].budget(), &topo[1].budget()) << "PoCL's CPU devices share one worker pool";
}

TEST(PoclAndRusticl, RusticlIsBatchedOnlyAndLinksAcrossPlatformsAreStaged) {
  const auto topo = topology::discover();
  const auto pocl = ringpipe::testing::find_device(topo, is_pocl);
  const auto rusticl = ringpipe::testing::find_device(topo, is_rusticl);
  ASSERT_TRUE(pocl && rusticl) << "RUSTICL_ENABLE=llvmpipe with PoCL expected";
  const auto& r = topo[*rusticl].info();
  EXPECT_FALSE(r.svm.fine_buffer);
  ASSERT_EQ(r.modes.size(), 1u);
  EXPECT_EQ(r.modes[0], kernel_mode::batched);
  EXPECT_EQ(r.persistent_budget, 0u);
  EXPECT_EQ(topo.link(*pocl, *rusticl), link_kind::staged);
  EXPECT_EQ(topo.link(*rusticl, *pocl), link_kind::staged);
  // Two kernels on rusticl share no ring: each copies its batches through pinned memory.
  EXPECT_EQ(topo.link(*rusticl, *rusticl), link_kind::staged);
  EXPECT_TRUE(topo.failures().empty()) << topo.failures().front().what;
}

TEST(NoPlatform, DiscoveryFailsWithAClearMessage) {
  try {
    (void)topology::discover();
    FAIL() << "discovery succeeded with OCL_ICD_VENDORS=" << std::getenv("OCL_ICD_VENDORS");
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::no_platform));
    EXPECT_NE(std::string(e.what()).find("no OpenCL platform found: install pocl-opencl-icd"), std::string::npos)
        << e.what();
  }
}

TEST(OnePocl, FilterMatchingNothingNamesTheDevicesFound) {
  discovery_options options;
  options.device_filter = "no-such-device";
  try {
    (void)topology::discover(options);
    FAIL() << "a filter matching nothing was accepted";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::no_device));
    const std::string what = e.what();
    EXPECT_NE(what.find("'no-such-device' matched no device"), std::string::npos) << what;
    EXPECT_NE(what.find("Portable Computing Language"), std::string::npos) << what;
  }
}

// A filter from the environment, maybe set long ago in a shell, says where it came from.
TEST(OnePocl, FilterFromTheEnvironmentSaysSo) {
  ASSERT_EQ(::setenv("RINGPIPE_DEVICE_FILTER", "no-such-device", 1), 0);
  std::string what;
  try {
    (void)topology::discover(); // its options read RINGPIPE_DEVICE_FILTER
  } catch (const ringpipe::error& e) {
    what = e.what();
  }
  ::unsetenv("RINGPIPE_DEVICE_FILTER");
  EXPECT_NE(what.find("'no-such-device' (RINGPIPE_DEVICE_FILTER) matched no device"), std::string::npos) << what;
}

TEST(OnePocl, FilterKeepsMatchingDevicesOnly) {
  discovery_options options;
  options.device_filter = "portable computing"; // case-insensitive
  const auto topo = topology::discover(options);
  ASSERT_EQ(topo.size(), 1u);
  EXPECT_TRUE(is_pocl(topo[0]));
}

} // namespace
