// Pipelines stopped while they run: by the application with messages in flight, by another
// thread while one waits, and by a host function of their own (on a runtime of one io thread
// too). Every stop releases whoever waits and accounts for every message the sources made.
#include <ringpipe/pipeline.hpp>

#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

using ringpipe::testing::checker;
using ringpipe::testing::counted_source;
using ringpipe::testing::host_step;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;

// Stop while messages are in flight: source -> kernel (device 0) -> host -> kernel (last device)
// -> slow sink, every stage one message out per message in. Every message the source produced
// was either delivered, in order, or is counted by the stop report; none vanished.
TEST_F(PipelineTest, StopWithMessagesInFlightReportsEveryUndeliveredMessage) {
  std::atomic<std::uint32_t> generated{0}, delivered{0};
  pipeline_options options;
  options.capacity = 64;
  options.name = "stop-in-flight";
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counted_source(generated));
  auto k1 = p.add_kernel<msg, msg>("k1", test_kernel("test_map"), on_device(0));
  auto h = p.add_host<msg, msg>("host", host_step);
  auto k2 = p.add_kernel<msg, msg>("k2", test_kernel("test_map"), on_device(topo().size() - 1));
  checker check;
  check.hops = 3;
  auto sink = p.add_sink<msg>("slow", [&](const msg& m) {
    check(m);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    delivered.fetch_add(1);
  });
  p.connect(src.out(), k1.in());
  p.connect(k1.out(), h.in());
  p.connect(h.out(), k2.in());
  p.connect(k2.out(), sink.in());
  p.start();
  // Stop once the sink has taken some and every ring has filled behind it.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (delivered.load() < 500 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_GE(delivered.load(), 500u) << "the pipeline made no progress";
  const auto report = p.stop();
  EXPECT_EQ(check.errors, 0u) << check.first_error;
  EXPECT_EQ(delivered.load() + report.undelivered, generated.load())
      << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
  EXPECT_GT(report.undelivered, 0u) << "the slow sink left nothing queued: the stop was not mid-stream";
  EXPECT_FALSE(report.rings.empty());
  EXPECT_NE(report.text().find(std::to_string(report.undelivered) + " messages undelivered: "), std::string::npos)
      << report.text();
  std::printf("stopped mid-stream: generated %u, delivered %u, %s\n", generated.load(), delivered.load(),
              report.text().c_str());
}

// A host function that stops its own pipeline (a sink that has seen enough): stop() returns at
// once (it does not wait for the function that called it), a thread in wait() is released with
// errc::cancelled, the stage is not called again, and the report counts the run the function was
// in as the stage leaves it. The message a per-message transform was on when it called stop()
// counts as given to it; what it returns from that call is not passed on.
TEST_F(PipelineTest, AHostFunctionThatStopsItsPipelineReleasesWaitAndAccountsForEveryMessage) {
  enum class where { sink, batch_sink, transform, source };
  for (const where at : {where::sink, where::batch_sink, where::transform, where::source}) {
    SCOPED_TRACE(static_cast<int>(at));
    std::atomic<std::uint32_t> generated{0}, delivered{0}, after_stop{0};
    std::atomic<bool> stopped{false};
    std::atomic<std::int64_t> stop_took_ms{-1};
    stop_report report;
    pipeline_options options{.name = "stops itself"};
    options.give_up_after = 20s; // a stop that waited for its own caller would take this long
    std::atomic<int> metrics_calls{0};
    options.on_metrics = [&](const pipeline_metrics&) { ++metrics_calls; }; // finished by the stop
    pipeline p(rt(), options);
    const auto stop_here = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      report = p.stop();
      stop_took_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      stopped = true;
    };
    auto src = p.add_source<msg>("source", [&]() -> std::optional<msg> {
      const auto n = generated++;
      if (at == where::source && n == 3000) stop_here(); // made after the stop: not counted
      return make_test_message<16>(n);
    });
    auto mid = p.add_host<msg, msg>("mid", [&](const msg& m) {
      if (at == where::transform && m.seq == 2000) stop_here();
      return m;
    });
    const auto take = [&](const msg& m) {
      after_stop += stopped ? 1 : 0;
      delivered++;
      if ((at == where::sink || at == where::batch_sink) && m.seq == 2000) stop_here();
    };
    std::optional<stage_ref<msg, no_message>> sink;
    if (at == where::batch_sink)
      sink = p.add_sink_batch<msg>("sink", [&](std::span<const msg> run) {
        for (const auto& m : run)
          take(m);
      });
    else
      sink = p.add_sink<msg>("sink", take);
    p.connect(src.out(), mid.in());
    p.connect(mid.out(), sink->in());
    p.start();
    expect_error([&] { p.wait(60s); }, make_error_code(errc::cancelled), {"pipeline 'stops itself' was stopped"},
                 "wait() returned after a stop");
    ASSERT_TRUE(stopped.load());
    EXPECT_LT(stop_took_ms.load(), 10000) << "stop() waited for the function that called it";
    const std::uint32_t given_to_mid = at == where::transform ? 1 : 0;
    const std::uint32_t made_after = at == where::source ? 1 : 0;
    EXPECT_EQ(delivered.load() + report.undelivered + given_to_mid + made_after, generated.load())
        << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
    // A batch function gets its whole run at once: the rest of that run is its own to take.
    if (at != where::batch_sink) {
      EXPECT_EQ(after_stop.load(), 0u) << "the sink was called after the stop";
    }
    EXPECT_EQ(report.lost, 0u) << report.text();
    EXPECT_GE(metrics_calls.load(), 1) << "the stop made no last metrics call";
  }
}

// A host function that stops its pipeline and then throws: the stop came first, so wait() throws
// errc::cancelled, and says the failure after it; the report a later stop() makes counts the
// message the function threw on as lost. Before, wait() threw either the stop alone or the
// failure alone, whichever it saw first.
TEST_F(PipelineTest, AHostFunctionThatThrowsAfterStoppingItsPipelineIsReportedEveryTime) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    SCOPED_TRACE(attempt);
    std::atomic<std::uint32_t> generated{0}, taken{0};
    pipeline p(rt(), {"stops then throws"});
    auto src = p.add_source<msg>("source", counted_source(generated));
    auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
      ++taken;
      if (m.seq != 2000) return;
      (void)p.stop();
      throw std::runtime_error("boom after the stop");
    });
    p.connect(src.out(), sink.in());
    p.start();
    expect_error([&] { p.wait(60s); }, make_error_code(errc::cancelled),
                 {"pipeline 'stops then throws' was stopped; after the stop, stage 'sink' failed: boom after the stop"},
                 "wait() returned after a stop");
    const auto report = p.stop();
    EXPECT_EQ(report.lost, 1u) << report.text();
    const std::uint32_t delivered = taken.load() - 1; // the sink's last call threw
    EXPECT_EQ(delivered + report.lost + report.undelivered, generated.load()) << report.text();
    EXPECT_NE(report.text().find("1 lost in stage 'sink'"), std::string::npos) << report.text();
  }
}

// A stop by another thread releases a thread in wait() at once (it waited for its own timeout).
TEST_F(PipelineTest, AStopByAnotherThreadReleasesAThreadInWait) {
  pipeline p(rt(), {"stopped elsewhere"});
  auto src =
      p.add_source<msg>("source", [n = 0u]() mutable -> std::optional<msg> { return make_test_message<16>(n++); });
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), sink.in());
  p.start();
  auto waiting = std::async(std::launch::async, [&] {
    expect_error([&] { p.wait(60s); }, make_error_code(errc::cancelled), {"pipeline 'stopped elsewhere' was stopped"},
                 "wait() returned after a stop");
  });
  std::this_thread::sleep_for(20ms);
  (void)p.stop();
  EXPECT_EQ(waiting.wait_for(30s), std::future_status::ready) << "wait() still waits 30 s after the stop";
}

// A sink that stops its pipeline on a runtime fixed at one io thread (a rank bound to one core):
// the other stages and the kernel's proxy must leave on the thread the sink's function holds. A
// stand-in thread runs them (runtime::stand_in_thread): the stop took give_up_after (500 ms by
// default), said each stage was given up on and detached the kernel.
TEST_F(PipelineTest, AHostFunctionStopsItsPipelineOnARuntimeOfOneIoThread) {
  runtime one(topology::discover(), runtime_options{.threads = 1});
  std::atomic<std::uint32_t> generated{0}, delivered{0};
  std::atomic<std::int64_t> stop_took_ms{-1};
  stop_report report;
  pipeline_options options{.name = "one thread"};
  options.give_up_after = 20s; // a stop that waited for the held thread would take this long
  pipeline p(one, options);
  auto src = p.add_source<msg>("source", counted_source(generated));
  auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
  auto mid = p.add_host<msg, msg>("host", host_step);
  checker check;
  check.hops = 2;
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
    check(m);
    delivered.fetch_add(1);
    if (m.seq != 2000) return;
    const auto t0 = std::chrono::steady_clock::now();
    report = p.stop();
    stop_took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  });
  p.connect(src.out(), k.in());
  p.connect(k.out(), mid.in());
  p.connect(mid.out(), sink.in());
  p.start();
  expect_error([&] { p.wait(60s); }, make_error_code(errc::cancelled), {"pipeline 'one thread' was stopped"},
               "wait() returned after a stop");
  EXPECT_GE(stop_took_ms.load(), 0) << "the sink never stopped the pipeline";
  EXPECT_LT(stop_took_ms.load(), 10000) << "stop() waited for stages that needed the thread it held";
  EXPECT_EQ(check.errors, 0u) << check.first_error;
  EXPECT_EQ(delivered.load(), 2001u) << "the sink was called after the stop";
  EXPECT_EQ(delivered.load() + report.undelivered, generated.load())
      << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
  for (const auto& s : p.metrics().stages) {
    if (s.name == "map") {
      EXPECT_EQ(s.state, "stopped") << "the kernel was given up on";
    }
  }
  for (int i = 0; i < 1000 && one.threads() != 1; ++i)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(one.threads(), 1u) << "the stand-in still runs";
}

} // namespace
