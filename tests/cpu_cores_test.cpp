// Whether the CPU devices of a run compete for the host's cores: each worker pool counted once
// (PoCL's devices share one), against the host's cores; llvmpipe's workers from LP_NUM_THREADS.
#include "described_topology.hpp"

#include <ringpipe/cpu_cores.hpp>

#include <gtest/gtest.h>

using namespace ringpipe;
using ringpipe::testing::describe;
using ringpipe::testing::described_device;

namespace {

described_device pocl(std::string name, std::uint32_t workers) {
  auto d = ringpipe::testing::pocl_cpu(std::move(name));
  d.workers = workers;
  return d;
}
described_device llvmpipe(std::uint32_t workers) {
  auto d = ringpipe::testing::rusticl_cpu();
  d.workers = workers;
  return d;
}

cpu_core_use use_of(const topology& t, unsigned cores) {
  std::vector<const device*> all;
  for (const auto& d : t.devices())
    all.push_back(&d);
  return cpu_devices_core_use(all, cores);
}

TEST(CpuCores, DevicesThatEachRunAThreadPerCoreShareTheCores) {
  const auto t = describe({pocl("a", 2), pocl("b", 2), llvmpipe(2)});
  const auto use = use_of(t, 2);
  EXPECT_EQ(use.pools, 2u); // both PoCL devices run on one pool of workers
  EXPECT_EQ(use.worker_threads, 4u);
  EXPECT_TRUE(use.shared());
  EXPECT_EQ(use.describe(), "2 worker pools of CPU devices run 4 threads on 2 host cores: they share the cores");
}

TEST(CpuCores, DevicesLimitedToAWorkerEachHaveCoresOfTheirOwn) {
  const auto t = describe({pocl("a", 1), llvmpipe(1)});
  EXPECT_FALSE(use_of(t, 2).shared());
  EXPECT_EQ(use_of(t, 2).describe(),
            "2 worker pools of CPU devices run 2 threads on 2 host cores: each has cores of its own");
  EXPECT_TRUE(use_of(t, 1).shared()); // one core for two workers
  // Three pools of one worker: own cores on three, shared on two.
  const auto three =
      describe({pocl("a", 1), llvmpipe(1), {"Intel(R) OpenCL", "cpu", false, 0, "", device_type::cpu, 1}});
  EXPECT_FALSE(use_of(three, 3).shared());
  EXPECT_TRUE(use_of(three, 2).shared());
}

TEST(CpuCores, OnePoolOrNoCpuDeviceSharesWithNothing) {
  const auto pocl_only = describe({pocl("a", 2), pocl("b", 2)});
  EXPECT_EQ(use_of(pocl_only, 1).pools, 1u);
  EXPECT_FALSE(use_of(pocl_only, 1).shared()); // its devices are one pool already
  EXPECT_EQ(use_of(pocl_only, 2).describe(), "1 worker pool of CPU devices runs 2 threads on 2 host cores");
  const auto gpu = describe({ringpipe::testing::gpu_without_svm(), pocl("a", 2)});
  EXPECT_EQ(use_of(gpu, 2).pools, 1u);
  EXPECT_EQ(use_of(gpu, 2).worker_threads, 2u); // the GPU runs no host thread
  const auto gpus = describe({ringpipe::testing::gpu_without_svm()});
  EXPECT_EQ(use_of(gpus, 2).pools, 0u);
  EXPECT_EQ(use_of(gpus, 2).describe(), "");
}

TEST(CpuCores, LlvmpipeRunsLpNumThreadsElseAThreadPerCpuUpToThirtyTwo) {
  EXPECT_EQ(llvmpipe_worker_threads(nullptr, 2), 2u);
  EXPECT_EQ(llvmpipe_worker_threads(nullptr, 1), 1u);
  EXPECT_EQ(llvmpipe_worker_threads(nullptr, 64), 32u);
  EXPECT_EQ(llvmpipe_worker_threads("", 4), 4u);
  EXPECT_EQ(llvmpipe_worker_threads("1", 8), 1u);
  EXPECT_EQ(llvmpipe_worker_threads("0", 8), 1u); // runs on the calling thread
  EXPECT_EQ(llvmpipe_worker_threads("6", 2), 6u); // more threads than cores is what it runs
  EXPECT_EQ(llvmpipe_worker_threads("100", 2), 32u);
  EXPECT_EQ(llvmpipe_worker_threads("many", 3), 3u); // not a number: the default
  EXPECT_EQ(llvmpipe_worker_threads("-2", 3), 3u);
}

} // namespace
