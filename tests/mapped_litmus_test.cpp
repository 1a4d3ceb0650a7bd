// The mapped-memory litmus (include/ringpipe/mapped_litmus.hpp) on the devices CI has: PoCL's CPU
// device passes it for every kind of memory (its buffers are host memory the kernel reads in
// place), a planted tear is counted, and rusticl says why it cannot run it. On NVIDIA's OpenCL it
// fails in both directions (docs/performance.md, "NVIDIA H100"); scripts/gpu-run.sh runs it there.

#include <ringpipe/mapped_litmus.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using MappedLitmus = ringpipe::testing::device_test;

TEST_F(MappedLitmus, PoclStreamsAndPingPongsThroughEveryKindOfMappedMemory) {
  const auto& dev = topo()[0];
  if (!ringpipe::testing::is_pocl(dev)) GTEST_SKIP() << "no PoCL device in this environment (see ringpipe-info)";
  for (auto memory : {mapped_memory::alloc_host_ptr, mapped_memory::use_host_ptr, mapped_memory::coarse_svm})
    for (std::uint32_t capacity : {64u, 1u}) {
      litmus_options o;
      o.memory = memory;
      o.capacity = capacity;
      o.messages = capacity == 1 ? 2'000 : 50'000;
      const auto r = run_mapped_litmus(dev, o);
      SCOPED_TRACE(std::string(to_string(memory)) + ", " + std::to_string(capacity) + " slots: " + r.summary());
      EXPECT_TRUE(r.holds());
      EXPECT_EQ(r.host_received, o.messages);
      EXPECT_EQ(r.device_received, o.messages);
      EXPECT_TRUE(r.host_saw_start);
      EXPECT_EQ(r.round_trip_ns.size(), capacity == 1 ? o.messages : 0u);
    }
}

TEST_F(MappedLitmus, APlantedTearIsCountedAndFailsTheLitmus) {
  const auto& dev = topo()[0];
  if (!ringpipe::testing::is_pocl(dev)) GTEST_SKIP() << "no PoCL device in this environment (see ringpipe-info)";
  litmus_options o;
  o.messages = 10'000;
  o.capacity = 64;
  o.tear_every = 100; // word 7 of every 100th echo left zero
  const auto r = run_mapped_litmus(dev, o);
  EXPECT_EQ(r.host_torn, 100u) << r.summary();
  EXPECT_EQ(r.host_stale + r.device_stale + r.device_torn, 0u) << r.summary();
  EXPECT_FALSE(r.holds());
  EXPECT_NE(r.summary().find("FAILS"), std::string::npos) << r.summary();
}

TEST_F(MappedLitmus, WhatADeviceCannotRunIsSaidNotRun) {
  const auto& dev = topo()[0];
  litmus_options o;
  o.fence = device_fence::system_fence; // NVIDIA's PTX
  o.messages = 10;
  if (dev.info().vendor.find("NVIDIA") != std::string::npos) GTEST_SKIP() << "an NVIDIA device runs membar.sys";
  const auto r = run_mapped_litmus(dev, o);
  EXPECT_FALSE(r.not_run.empty());
  EXPECT_FALSE(r.holds());
  EXPECT_NE(r.summary().find("not run: "), std::string::npos) << r.summary();
  if (dev.info().loops_limited) {
    o.fence = device_fence::memory_fence;
    const auto cut = run_mapped_litmus(dev, o);
    EXPECT_NE(cut.not_run.find("65535"), std::string::npos) << cut.summary();
  }
}

} // namespace
