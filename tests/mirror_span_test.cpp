// Batched map kernels on devices without shared memory (rusticl here; NVIDIA's GPUs) run each batch
// as a span over device mirrors (src/kernel/mirror_spans.cpp): the batch is copied up, the kernel's
// span form runs one work-item per message over as many work-groups as that takes, and the keep
// flags and results come back for the host to publish in order. These tests check that batches
// spread over work-groups, grow to about 1 MiB, and deliver every message exactly once and in
// order, with drops, batches that are not whole groups, and batches queued behind each other.
#include <ringpipe/kernel.hpp>

#include "device_fixture.hpp"
#include "ring_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::msg16;
using ringpipe::testing::stream;

namespace {

using map16 = ring_kernel<msg16, msg16>;

class MirrorSpanTest : public ringpipe::testing::device_test {
protected:
  void SetUp() override {
    const auto& svm = topo()[0].info().svm;
    ASSERT_FALSE(svm.fine_buffer && svm.atomics) << "device '" << topo()[0].name()
                                                 << "' shares memory with the host: its batches run over the rings "
                                                    "themselves (ctest runs these tests on rusticl)";
  }
};

kernel_spec test_kernel(const char* name) { return {test_stages_source(16), name, ""}; }

TEST_F(MirrorSpanTest, BatchesRunOverSeveralGroupsExactlyOnceInOrder) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 4096, {"in"}), out(dev, 4096, {"out"});
  map16 k(rt(), dev, test_kernel("test_map"));
  k.start(in, out);
  stream(in, out, 200'000, k);
  const auto stats = k.stats();
  EXPECT_EQ(stats.msgs_in, 200'000u);
  EXPECT_EQ(stats.msgs_out, 200'000u);
  // A ring kernel launches one group per batch; a span one per 64 messages (and one per message
  // of a batch's last partial group).
  EXPECT_GT(stats.work_groups, 2 * stats.launches) << "batches did not spread over work-groups";
}

// Rings of 64 slots: every batch is at most one group, most of them partial, so the items beyond
// the last whole group run as groups of one behind it; every other message is dropped.
TEST_F(MirrorSpanTest, DropsInPartialGroupsKeepOrder) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 64, {"in"}), out(dev, 64, {"out"});
  map16 k(rt(), dev, test_kernel("test_filter_even"));
  k.start(in, out);
  stream(in, out, 20'001, 1, [](std::uint32_t s) { return s % 2 == 0; }, {&k});
  EXPECT_EQ(k.stats().msgs_in, 20'001u);
  EXPECT_EQ(k.stats().msgs_out, 10'001u);
}

// A launch costs about the same whatever its size, so a batch takes up to about 1 MiB of
// messages, up to half the input ring with one staging lane and a quarter with two (the producer
// refills as much as is in flight): 32,768 queued 16-byte messages over a 65,536-slot ring are
// one launch with one lane (a CPU device's default), two with two; all come out in order.
std::uint64_t launches_for_queued(runtime& rt, const device& dev, std::uint32_t lanes) {
  constexpr std::uint32_t queued = 32'768;
  ring<msg16> in(dev, 65'536, {"in"}), out(dev, 65'536, {"out"});
  for (std::uint32_t i = 0; i < queued; ++i)
    EXPECT_TRUE(in.try_push(make_test_message<16>(i)));
  kernel_options options;
  options.staging_lanes = lanes;
  map16 k(rt, dev, test_kernel("test_filter_even"), options);
  k.start(in, out);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (k.stats().msgs_in < queued && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  std::uint32_t expected = 0;
  msg16 m{};
  while (out.try_pop(m)) {
    EXPECT_EQ(m.seq, expected);
    expected += 2;
  }
  EXPECT_EQ(expected, queued);
  in.close();
  k.stop(10s);
  return k.stats().launches;
}

TEST_F(MirrorSpanTest, ABatchTakesAboutOneMebibyteOfMessagesUpToHalfTheRingPerLane) {
  EXPECT_EQ(launches_for_queued(rt(), topo()[0], 1), 1u);
  EXPECT_EQ(launches_for_queued(rt(), topo()[0], 2), 2u);
}

// Two lanes (the next batch uploads while one runs) where the user asks for them on a CPU device:
// batches queued behind each other with drops in both still come out in order.
TEST_F(MirrorSpanTest, BatchesQueuedBehindEachOtherWithDropsKeepOrder) {
  const auto& dev = topo()[0];
  kernel_options options;
  options.staging_lanes = 2;
  options.batch_capacity = 256;
  ring<msg16> in(dev, 4096, {"in"}), out(dev, 4096, {"out"});
  map16 k(rt(), dev, test_kernel("test_filter_even"), options);
  k.start(in, out);
  stream(in, out, 100'003, 1, [](std::uint32_t s) { return s % 2 == 0; }, {&k});
  EXPECT_EQ(k.stats().msgs_out, 50'002u);
  EXPECT_GT(k.stats().overlapped_launches, 0u) << "no batch was queued behind another";
}

} // namespace
