// Pipelines that fail: a stage that throws, a kernel error or stall, resources a device cannot
// give, a mis-sized send; and backpressure. Every failure names its stage and loses nothing it
// does not report. (Refusals before launch: pipeline_validation_test.cpp; stops:
// pipeline_stop_test.cpp.)
#include <ringpipe/pipeline.hpp>

#include <ringpipe/occupancy.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

using ringpipe::testing::checker;
using ringpipe::testing::counted_source;
using ringpipe::testing::counting_source;
using ringpipe::testing::host_step;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;

// ---- failures ----

TEST_F(PipelineTest, HostStageThatThrowsFailsThePipelineWithItsName) {
  pipeline p(rt(), {"throwing"});
  auto src = p.add_source<msg>("source", counting_source(1000000));
  auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
  auto h = p.add_host<msg, msg>("boom", [](const msg& m) {
    if (m.seq == 5000) throw std::runtime_error("bad sample 5000");
    return m;
  });
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), h.in());
  p.connect(h.out(), sink.in());
  p.start();
  try {
    p.wait(60s);
    FAIL() << "a pipeline whose stage threw finished";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::stage_failed));
    const std::string what = e.what();
    EXPECT_NE(what.find("stage 'boom' failed: bad sample 5000"), std::string::npos) << what;
  }
  const auto m = p.metrics();
  EXPECT_NE(m.stages[1].state, "running") << "the kernel was stopped";
}

TEST_F(PipelineTest, SourceThatThrowsMidStreamFailsWithItsName) {
  pipeline p(rt(), {"source-throws"});
  auto src = p.add_source<msg>("gen", [n = 0u]() mutable -> std::optional<msg> {
    if (n == 777) throw std::runtime_error("sensor unplugged");
    return make_test_message<16>(n++);
  });
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), sink.in());
  p.start();
  try {
    p.wait(60s);
    FAIL() << "a pipeline whose source threw finished";
  } catch (const ringpipe::error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 'gen' failed: sensor unplugged"), std::string::npos) << e.what();
  }
}

TEST_F(PipelineTest, KernelErrorFailsThePipelineWithTheStageName) {
  pipeline p(rt(), {"kernel-error"});
  auto src = p.add_source<msg>("source", counting_source(100000));
  auto spec = test_kernel("test_fail_at");
  spec.args = {kernel_arg::of(std::uint32_t{300})};
  auto k = p.add_kernel<msg, msg>("faulty", spec);
  auto k2 = p.add_kernel<msg, msg>("after", test_kernel("test_map"));
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), k2.in());
  p.connect(k2.out(), sink.in());
  p.start();
  try {
    p.wait(60s);
    FAIL() << "a pipeline whose kernel failed finished";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::kernel_fault));
    const std::string what = e.what();
    EXPECT_NE(what.find("stage 'faulty' failed"), std::string::npos) << what;
    EXPECT_NE(what.find("error code 42"), std::string::npos) << what;
  }
  // Every kernel stops; the pipeline's destructor then waits for their launches to return.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  auto stopped = [&] {
    const auto m = p.metrics();
    return m.stages[2].state != "running" && m.stages[2].state != "launched";
  };
  while (!stopped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(stopped()) << p.metrics().table();
}

// A kernel stage whose heartbeat stops while it holds a message: the watchdog reports it with
// the stage's name within a few stall timeouts, the pipeline fails and every stage stops.
TEST_F(PipelineTest, StalledKernelFailsThePipelineWithTheStageName) {
  const auto& dev = topo()[0];
  const bool reachable = dev.info().svm.fine_buffer && dev.info().svm.atomics;
  pipeline p(rt(), {"stall"});
  auto src = p.add_source<msg>("source", counting_source(100000));
  auto spec = test_kernel("test_stall_at");
  // Where the host cannot stop it (no SVM), the kernel gives up spinning after a while (llvmpipe
  // cuts it short after 20-40 ms).
  spec.args = {kernel_arg::of(std::uint32_t{300}),
               kernel_arg::of(reachable ? std::uint32_t{0xffffffff} : std::uint32_t{1} << 30)};
  kernel_options options;
  options.stall_timeout = reachable ? 500ms : 5ms; // unreachable: before the kernel gives up
  options.first_launch_timeout = options.stall_timeout;
  auto k = p.add_kernel<msg, msg>("staller", spec, on_device(0), options);
  std::atomic<std::uint32_t> delivered{0};
  auto sink = p.add_sink<msg>("sink", [&](const msg&) { delivered.fetch_add(1); });
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  const auto started = std::chrono::steady_clock::now();
  p.start();
  expect_error([&] { p.wait(60s); }, make_error_code(errc::stalled),
               {"pipeline 'stall': stage 'staller' failed", "stalled"}, "a pipeline whose kernel stalled finished");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << "reported within a few stall timeouts";
  p.stop(); // after a failure too
  EXPECT_LE(delivered.load(), 300u) << "messages after the held one were delivered";
  for (const auto& st : p.metrics().stages)
    EXPECT_NE(st.state, "running") << "stage '" << st.name << "' still runs after the failure";
}

// A ring too large for its device: start() refuses it naming the ring, launches nothing, and the
// runtime runs the next pipeline normally.
TEST_F(PipelineTest, RingTooLargeForTheDeviceIsRefusedAndNothingIsHeld) {
  using big = test_message<4096>;
  {
    pipeline p(rt(), {"too-large"});
    auto src = p.add_source<big>("source", [] { return std::optional<big>{}; });
    auto k = p.add_kernel<big, big>("k", {test_stages_source(4096), "test_map"}, on_device(0));
    auto sink = p.add_sink<big>("sink", [](const big&) {});
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in(), {std::nullopt, 1u << 30}); // 4 TiB of slots
    try {
      p.start();
      FAIL() << "a 4 TiB ring was accepted";
    } catch (const ringpipe::error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::out_of_memory)) << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find("k.out->sink.in"), std::string::npos) << what;
      EXPECT_NE(what.find("bytes"), std::string::npos) << what;
      std::printf("refused: %s\n", what.c_str());
    }
  }
  for (const auto& d : topo().devices())
    EXPECT_EQ(d.budget().in_use(), 0u) << "a worker of " << d.name() << " is still held";
  pipeline q(rt(), {"after"});
  auto src = q.add_source<msg>("source", counting_source(1000));
  auto k = q.add_kernel<msg, msg>("k", test_kernel("test_map"), on_device(0));
  checker check;
  check.hops = 1;
  auto sink = q.add_sink<msg>("sink", [&](const msg& m) { check(m); });
  q.connect(src.out(), k.in());
  q.connect(k.out(), sink.in());
  q.run(60s);
  EXPECT_EQ(check.expected, 1000u);
  EXPECT_EQ(check.errors, 0u) << check.first_error;
}

// An application that asks for an inlet with the wrong message type is refused, and nothing is
// written: the stream that follows arrives exactly as pushed.
TEST_F(PipelineTest, MisSizedSendIsRefusedAndWritesNothing) {
  pipeline p(rt(), {"mis-sized"});
  auto in = p.add_inlet<msg>("in");
  auto k = p.add_kernel<msg, msg>("k", test_kernel("test_map"));
  checker check;
  check.hops = 1;
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) { check(m); });
  p.connect(in.out(), k.in());
  p.connect(k.out(), sink.in());
  p.start();
  try {
    (void)p.inlet<test_message<32>>("in");
    FAIL() << "a 32-byte inlet view of a 16-byte port was handed out";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
    EXPECT_NE(std::string(e.what()).find("inlet 'in' carries test_message<16> (16 bytes), not test_message<32> (32 "
                                         "bytes)"),
              std::string::npos)
        << e.what();
  }
  auto push = p.inlet<msg>("in");
  EXPECT_EQ(push.buffer().pushed(), 0u) << "the refused request wrote into the ring";
  try {
    (void)ring<test_message<32>>(push.shared_buffer());
    FAIL() << "a 32-byte view of 16-byte slots was accepted";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
  }
  for (std::uint32_t s = 0; s < 1000; ++s)
    push.push(make_test_message<16>(s), 10s);
  push.close();
  p.wait(60s);
  EXPECT_EQ(check.expected, 1000u);
  EXPECT_EQ(check.errors, 0u) << check.first_error;
}

// ---- backpressure ----

// A sink that sleeps slows the source; what is buffered never exceeds the rings' capacities plus
// the one message each actor holds.
TEST_F(PipelineTest, SlowSinkSlowsTheSourceAndBoundsMemory) {
  constexpr std::uint32_t count = 600;
  std::atomic<std::uint32_t> generated{0}, consumed{0}, worst{0};
  pipeline_options options;
  options.capacity = 16;
  options.name = "backpressure";
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counted_source(generated, count));
  auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
  auto h = p.add_host<msg, msg>("host", host_step);
  auto sink = p.add_sink<msg>("slow", [&](const msg&) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    const auto c = consumed.fetch_add(1) + 1;
    worst.store(std::max(worst.load(), generated.load() - c));
  });
  p.connect(src.out(), k.in());
  p.connect(k.out(), h.in());
  p.connect(h.out(), sink.in());
  p.run(5min);
  const auto m = p.metrics();
  std::uint32_t bound = 0;
  for (const auto& l : m.links)
    bound += l.capacity;
  bound += static_cast<std::uint32_t>(m.stages.size()); // a message in hand per stage
  bound += 64;                                          // a kernel group's claim in flight
  EXPECT_EQ(consumed.load(), count);
  EXPECT_LE(worst.load(), bound) << "messages buffered beyond the rings' capacities";
  // The rings filled: the sink was the bottleneck. (A host stage takes a run from its ring once
  // the run is done, so the message the sink just consumed may still hold its slot: - 1.)
  EXPECT_GE(worst.load(), 3u * 16u - 1u) << "the rings filled: the sink was the bottleneck";
}

} // namespace
