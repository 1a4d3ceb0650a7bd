// Residency under latency as the planner applies it (src/pipeline/residency.cpp), against
// topologies the test describes (no OpenCL platform needed): kernels that cannot all stay resident
// on a pool of host threads all prefer parked, and plan() says why.

#include <ringpipe/occupancy.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "planner_fixture.hpp"

#include <gtest/gtest.h>

#include <optional>

using namespace ringpipe;
using namespace ringpipe::testing;

namespace {

// Latency on a pool whose workers are host threads (PoCL's CPU devices): where the pool cannot
// keep all of the pipeline's kernels of automatic mode resident (it keeps one worker free) and
// the pipeline's busy threads outnumber the cores, they all prefer parked, and plan() says why: a
// resident one would spin on the core the parked ones' relaunches need. One kernel, a pool with
// workers to spare, cores to spare, a forced mode, GPU workers and batched-only devices are left
// as they were.
struct residency_case {
  const char* what;
  std::vector<ringpipe::testing::described_device> devices;
  std::uint32_t kernels;                   // chained, kernel i on device i % devices
  std::optional<kernel_mode> first_forced; // the first kernel's mode, if forced
  bool parked;                             // the automatic kernels prefer parked
  unsigned cores = 2;
};

TEST(Residency, KernelsThatCannotAllStayResidentOnAPoolOfHostThreadsAllPark) {
  using ringpipe::testing::pocl_cpu;
  auto roomy = pocl_cpu("big");
  roomy.budget = 16;
  auto gpu = pocl_cpu("gpu");
  gpu.type = device_type::gpu;
  const std::vector<residency_case> cases = {
      {"one kernel", {pocl_cpu()}, 1, std::nullopt, false},
      {"two kernels on one device", {pocl_cpu()}, 2, std::nullopt, true},
      {"three kernels on two devices of one pool", {pocl_cpu("a"), pocl_cpu("b")}, 3, std::nullopt, true},
      {"a pool with workers to spare", {roomy}, 3, std::nullopt, false},
      {"cores to spare", {pocl_cpu()}, 2, std::nullopt, false, 16},
      {"the first forced persistent: the other parks anyway", {pocl_cpu()}, 2, kernel_mode::persistent, false},
      {"the first forced batched: the other may stay resident", {pocl_cpu()}, 2, kernel_mode::batched, false},
      {"GPU workers are not host threads", {gpu}, 2, std::nullopt, false},
      {"batched-only devices", {ringpipe::testing::rusticl_cpu()}, 2, std::nullopt, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto ro = ringpipe::testing::two_cores();
    ro.host_cores = c.cores;
    runtime rt(describe(c.devices), ro);
    auto o = opts("residency", false);
    o.objective = pipeline_objective::latency;
    pipeline p(rt, o);
    std::size_t last = p.add_inlet<sample>("in").id;
    for (std::uint32_t k = 0; k < c.kernels; ++k) {
      kernel_options ko;
      if (k == 0) ko.mode = c.first_forced;
      const auto stage = p.add_kernel<sample, sample>("k" + std::to_string(k), map_kernel("twice"),
                                                      on_device(k % c.devices.size()), ko);
      p.connect(output_port<sample>{last}, stage.in());
      last = stage.id;
    }
    p.connect(output_port<sample>{last}, p.add_outlet<sample>("out").in());
    const auto plan = p.dry_run();
    for (std::uint32_t k = c.first_forced ? 1 : 0; k < c.kernels; ++k) {
      const auto* s = plan.find_stage("k" + std::to_string(k));
      EXPECT_EQ(s->mode, c.parked ? std::optional(kernel_mode::parked) : std::nullopt) << s->name;
      EXPECT_EQ(s->mode_from_objective, c.parked) << s->name;
      EXPECT_EQ(s->leaves_when_idle, c.parked && k == 0) << s->name << ": only k0's feeder is a host thread";
    }
    if (c.first_forced) {
      EXPECT_EQ(plan.find_stage("k0")->mode, c.first_forced) << "a forced mode stays";
    }
    EXPECT_EQ(plan.parking_reason.empty(), !c.parked) << plan.parking_reason;
    if (c.parked) {
      const std::string expected = c.kernels == 2 ? "kernels 'k0', 'k1' park: pool 'pocl' keeps 1 of their 2 resident"
                                                  : "kernels 'k0', 'k1', 'k2' park: pool 'pocl' keeps 1 of their 3";
      EXPECT_NE(plan.text().find(expected), std::string::npos) << plan.text();
      EXPECT_NE(plan.parking_reason.find("; 'k0', fed by host threads, leave as soon as their input runs dry"),
                std::string::npos)
          << plan.parking_reason;
      const auto k1 = "kernel 'k1' on device " + std::to_string(1 % c.devices.size()) + ", parked (objective)";
      EXPECT_NE(plan.text().find(k1), std::string::npos) << plan.text();
    }
  }
}

// The throughput objective batches those kernels instead: nothing is parked.
TEST(Residency, ThroughputLeavesParkingAlone) {
  runtime rt(describe({ringpipe::testing::pocl_cpu()}), ringpipe::testing::two_cores());
  auto o = opts("residency", false);
  o.objective = pipeline_objective::throughput;
  pipeline p(rt, o);
  two_kernels(p, 0, 0);
  const auto plan = p.dry_run();
  EXPECT_TRUE(plan.parking_reason.empty()) << plan.parking_reason;
  EXPECT_EQ(plan.find_stage("a")->mode, kernel_mode::batched);
}

// The room residency and the throughput rule count against: workers that may go persistent and
// still leave one for parked and batched kernels.
TEST(Residency, APoolKeepsOneWorkerBesideItsPersistentKernels) {
  occupancy one("one", 1), three("three", 3);
  EXPECT_EQ(one.persistent_room(), 0u);
  EXPECT_FALSE(one.persistent_available());
  EXPECT_EQ(three.persistent_room(), 2u);
  auto a = three.try_acquire(kernel_mode::persistent, "a");
  EXPECT_EQ(three.persistent_room(), 1u);
  auto b = three.try_acquire(kernel_mode::persistent, "b");
  EXPECT_EQ(three.persistent_room(), 0u);
  EXPECT_FALSE(three.persistent_available());
  b.release();
  EXPECT_EQ(three.persistent_room(), 1u);
  EXPECT_TRUE(three.persistent_available());
}

} // namespace
