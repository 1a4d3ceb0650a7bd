// Batched map kernels over shared memory run as spans (src/kernel/span_driver.cpp): the host
// claims a contiguous span of the input ring, launches one work-item per message over as many
// work-groups as that takes, and publishes the span in order. These tests check that spans use
// several groups per launch and still deliver every message exactly once and in order: across
// the rings' ends and the counters' wrap, with drops in spans queued behind each other, and when
// stopped with spans in flight.
#include <ringpipe/kernel.hpp>

#include "device_fixture.hpp"
#include "ring_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::msg16;
using ringpipe::testing::stream;

namespace {

using map16 = ring_kernel<msg16, msg16>;

class SpanTest : public ringpipe::testing::device_test {
protected:
  void SetUp() override {
    const auto& svm = topo()[0].info().svm;
    ASSERT_TRUE(svm.fine_buffer && svm.atomics) << "spans run over fine-grained SVM rings; device '" << topo()[0].name()
                                                << "' has none (ctest runs these tests on PoCL)";
  }
};

kernel_spec test_kernel(const char* name) { return {test_stages_source(16), name, ""}; }

kernel_options batched() {
  kernel_options options;
  options.mode = kernel_mode::batched;
  return options;
}

// Queues `count` messages before the kernel starts, so that its first steps find several spans'
// worth waiting (the second span launches behind the first).
void prefill(ring<msg16>& in, std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i)
    ASSERT_TRUE(in.try_push(make_test_message<16>(i)));
}

TEST_F(SpanTest, BatchedMapKernelLaunchesSeveralGroupsPerSpanExactlyOnceInOrder) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 4096, {"in"}), out(dev, 4096, {"out"});
  map16 k(rt(), dev, test_kernel("test_map"), batched());
  k.start(in, out);
  stream(in, out, 1'000'000, k);
  const auto stats = k.stats();
  EXPECT_EQ(stats.msgs_in, 1'000'000u);
  EXPECT_EQ(stats.msgs_out, 1'000'000u);
  // A ring kernel launches one group; spans launch one per 64 messages.
  EXPECT_GT(stats.work_groups, 2 * stats.launches) << "batched launches did not spread over work-groups";
}

TEST_F(SpanTest, SpansStopAtTheRingsEndsAndAcrossTheCountersWrap) {
  const auto& dev = topo()[0];
  const std::uint32_t start = 0xffffffffu - 5000;
  // Input and output rings of different sizes: spans end where either ring does.
  ring<msg16> in(dev, 8192, {"in", start}), out(dev, 4096, {"out", start + 7});
  map16 k(rt(), dev, test_kernel("test_map"), batched());
  k.start(in, out);
  stream(in, out, 100'000, k);
  EXPECT_EQ(k.stats().msgs_out, 100'000u);
  EXPECT_LT(in.buffer().header()->head, start) << "counters wrapped";
  EXPECT_GT(k.stats().work_groups, k.stats().launches) << "no span ran";
}

// Over rings narrower than 4,096 slots a batched map kernel stays a ring kernel: spans of a
// fraction of the ring would pay a launch every few hundred messages.
TEST_F(SpanTest, NarrowRingsKeepTheBatchedRingKernel) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 1024, {"in"}), out(dev, 1024, {"out"});
  map16 k(rt(), dev, test_kernel("test_map"), batched());
  k.start(in, out);
  stream(in, out, 100'000, k);
  EXPECT_EQ(k.stats().work_groups, k.stats().launches);
}

TEST_F(SpanTest, DroppedMessagesInQueuedSpansKeepTheOrder) {
  const auto& dev = topo()[0];
  constexpr std::uint32_t prefilled = 3000;
  ring<msg16> in(dev, 4096, {"in"}), out(dev, 4096, {"out"});
  map16 k(rt(), dev, test_kernel("test_filter_even"), batched());
  prefill(in, prefilled);
  k.start(in, out);
  stream(
      in, out, 200'001, 1, [](std::uint32_t s) { return s % 2 == 0; }, {&k}, prefilled);
  const auto stats = k.stats();
  EXPECT_EQ(stats.msgs_in, 200'001u);
  EXPECT_EQ(stats.msgs_out, 100'001u);
  EXPECT_GE(stats.overlapped_launches, 1u) << "no span was launched behind another";
}

// A stop-now request leaves spans in flight unpublished: every message is either delivered (a
// prefix of the stream, in order) or still queued in the input (the rest, in order), never both.
// Stopped right after the first launch, several times, with a slow body (the same results as
// test_map): the stops catch spans in flight, where test_map's spans could all return first.
TEST_F(SpanTest, StopNowWithSpansInFlightLosesAndRepeatsNothing) {
  const auto& dev = topo()[0];
  constexpr std::uint32_t count = 8000;
  int partial = 0;
  for (int round = 0; round < 10; ++round) {
    ring<msg16> in(dev, 8192, {"in"}), out(dev, 8192, {"out"});
    map16 k(rt(), dev, test_kernel("test_slow_map"), batched());
    prefill(in, count);
    k.start(in, out);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (k.stats().launches == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    k.stop_now();
    ASSERT_TRUE(k.wait_exited(10s));
    EXPECT_EQ(k.state(), kernel_state::stopped);
    std::vector<msg16> got(count);
    const auto delivered = static_cast<std::uint32_t>(out.pop_n(got));
    for (std::uint32_t i = 0; i < delivered; ++i) {
      ASSERT_EQ(got[i].seq, i);
      ASSERT_EQ(got[i].check, test_check_after(i, 1));
    }
    const auto queued = static_cast<std::uint32_t>(in.pop_n(got));
    ASSERT_EQ(delivered + queued, count);
    for (std::uint32_t i = 0; i < queued; ++i)
      ASSERT_EQ(got[i].seq, delivered + i) << "a delivered message is still queued, or one is missing";
    EXPECT_EQ(k.stats().msgs_in, delivered);
    partial += delivered < count ? 1 : 0;
  }
  EXPECT_GT(partial, 0) << "every stop came after the whole stream was published: nothing was in flight";
}

TEST_F(SpanTest, DrainStopPublishesEverythingQueued) {
  const auto& dev = topo()[0];
  constexpr std::uint32_t count = 5000;
  ring<msg16> in(dev, 8192, {"in"}), out(dev, 8192, {"out"});
  map16 k(rt(), dev, test_kernel("test_map"), batched());
  prefill(in, count);
  k.start(in, out);
  k.stop(10s);
  EXPECT_EQ(k.state(), kernel_state::stopped);
  EXPECT_EQ(in.size(), 0u);
  std::vector<msg16> got(count);
  ASSERT_EQ(out.pop_n(got), count);
  for (std::uint32_t i = 0; i < count; ++i)
    ASSERT_EQ(got[i].seq, i);
  EXPECT_FALSE(out.closed()) << "a drain request is not the end of the stream";
}

} // namespace

namespace {

// A resident kernel with a slow body (one group: one compute unit, not vectorised) falls behind a
// full ring for tens of milliseconds: it hands the stream to spans, and takes it back once messages come one at a time
// (no launch per message). A forced mode is kept.
TEST_F(SpanTest, ResidentKernelHandsABacklogToSpansAndTakesItBack) {
  const auto& dev = topo()[0];
  for (const bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "mode forced persistent" : "mode chosen");
    constexpr std::uint32_t capacity = 65536;
    ring<msg16> in(dev, capacity, {"in"}), out(dev, capacity, {"out"});
    kernel_options options;
    if (forced) options.mode = kernel_mode::persistent;
    map16 k(rt(), dev, test_kernel("test_slow_map"), options);
    prefill(in, capacity);
    k.start(in, out);
    ASSERT_NE(k.mode(), kernel_mode::batched);
    std::vector<msg16> got(capacity);
    std::uint32_t received = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (received < capacity && std::chrono::steady_clock::now() < deadline) {
      const auto n = static_cast<std::uint32_t>(out.pop_n(std::span(got).first(capacity - received)));
      for (std::uint32_t i = 0; i < n; ++i, ++received)
        ASSERT_EQ(got[i].seq, received) << "lost, duplicated or reordered";
      if (n == 0) std::this_thread::yield();
    }
    ASSERT_EQ(received, capacity) << "the kernel stopped delivering";
    // One message at a time: the resident kernel answers, no launch per message.
    const auto ping = [&](std::uint32_t seq) {
      in.push(make_test_message<16>(seq), 10s);
      msg16 m{};
      ASSERT_TRUE(out.pop(m, 10s));
      ASSERT_EQ(m.seq, seq);
      ASSERT_EQ(m.check, test_check_after(seq, 1));
    };
    for (std::uint32_t i = 0; i < 20; ++i)
      ping(capacity + i);
    const auto launches = k.stats().launches;
    for (std::uint32_t i = 20; i < 120; ++i)
      ping(capacity + i);
    in.close();
    k.wait(10s);
    const auto stats = k.stats();
    EXPECT_EQ(stats.msgs_out, capacity + 120u);
    if (forced) {
      EXPECT_EQ(stats.handovers, 0u) << "a forced mode was changed";
      EXPECT_EQ(stats.work_groups, stats.launches);
    } else {
      EXPECT_GE(stats.handovers, 1u) << "the backlog stayed with the resident kernel";
      EXPECT_GT(stats.work_groups, stats.launches) << "no span ran";
    }
    // At most one launch counted late (the thread that launched may not have run since).
    EXPECT_LE(stats.launches - launches, 1u) << "single messages were launched for, not answered by a resident kernel";
  }
}

// A resident kernel whose consumer is the limit keeps its backlog: with its output ring half full
// too, spans would only take the workers the consumer runs on (a CPU device's host threads). The
// consumer here starts behind (the output half full of earlier messages) and then waits. Once it
// drains the output, the backlog goes to spans as above.
TEST_F(SpanTest, ResidentKernelKeepsABacklogWhileItsOutputIsHalfFull) {
  const auto& dev = topo()[0];
  constexpr std::uint32_t capacity = 65536, out_capacity = 4096, earlier = out_capacity / 2;
  ring<msg16> in(dev, capacity, {"in"}), out(dev, out_capacity, {"out"});
  map16 k(rt(), dev, test_kernel("test_slow_map"), {});
  prefill(in, capacity);
  for (std::uint32_t i = 0; i < earlier; ++i)
    ASSERT_TRUE(out.try_push(make_test_message<16>(capacity + i)));
  k.start(in, out);
  ASSERT_NE(k.mode(), kernel_mode::batched);
  // The proxy watches about every millisecond: dozens of watches find the input full.
  std::this_thread::sleep_for(60ms);
  EXPECT_GT(out.size(), earlier) << "the kernel did not run";
  EXPECT_EQ(k.stats().handovers, 0u) << "a backlog went to spans while the output was half full";
  EXPECT_EQ(k.stats().launches, 1u);
  std::vector<msg16> got(capacity + earlier);
  std::uint32_t received = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (received < capacity + earlier && std::chrono::steady_clock::now() < deadline) {
    const auto n = static_cast<std::uint32_t>(out.pop_n(std::span(got).first(capacity + earlier - received)));
    for (std::uint32_t i = 0; i < n; ++i, ++received)
      ASSERT_EQ(got[i].seq, received < earlier ? capacity + received : received - earlier)
          << "lost, duplicated or reordered";
    if (n == 0) std::this_thread::yield();
  }
  ASSERT_EQ(received, capacity + earlier) << "the kernel stopped delivering";
  in.close();
  k.wait(10s);
  EXPECT_GE(k.stats().handovers, 1u) << "once the output drained, the backlog stayed with the resident kernel";
}

} // namespace
