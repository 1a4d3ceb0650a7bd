// A started pipeline holds an io thread per host stage (runtime::hold_threads): on a host with the
// cores its stages run at once instead of taking turns on the runtime's first two threads. Host
// stages need no OpenCL device: ctest runs this with no platform.

#include <ringpipe/barrier.hpp>
#include <ringpipe/blocking.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <string>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

struct item {
  std::uint32_t seq;
};

/// Callers wait, up to `patience`, until `expected` of them are inside at once.
class meeting {
public:
  meeting(unsigned expected, std::chrono::milliseconds patience) : expected_(expected), patience_(patience) {}
  void arrive() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    all_in_.notify_all();
    if (all_in_.wait_for(lock, patience_, [&] { return arrived_ >= expected_; })) ++met_;
  }
  unsigned met() const {
    std::lock_guard lock(mutex_);
    return met_;
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable all_in_;
  unsigned expected_, arrived_ = 0, met_ = 0;
  std::chrono::milliseconds patience_;
};

constexpr unsigned chains = 3;
constexpr std::uint32_t per_chain = 1000;

// Three sources, each into a sink of its own; each source's first call waits for the other two.
void run_chains(runtime& rt, meeting& meet, std::uint32_t (&received)[chains], std::uint32_t (&misordered)[chains]) {
  pipeline p(rt, {"at once"});
  for (unsigned c = 0; c < chains; ++c) {
    const auto name = std::to_string(c);
    auto src = p.add_source<item>("src" + name, [&meet, sent = std::uint32_t{0}]() mutable -> std::optional<item> {
      if (sent == 0) meet.arrive();
      if (sent == per_chain) return std::nullopt;
      return item{sent++};
    });
    auto sink = p.add_sink<item>("sink" + name, [&, c](const item& m) {
      if (m.seq != received[c]) ++misordered[c];
      ++received[c];
    });
    p.connect(src.out(), sink.in());
  }
  EXPECT_NE(p.dry_run().text().find("runtime threads asked for: 6 (6 host stages, 0 kernels"), std::string::npos)
      << p.dry_run().text();
  p.start();
  EXPECT_GE(rt.threads(), std::min(6u, rt.thread_limit()));
  const std::string running = "runtime threads asked for: 6 (6 host stages, 0 kernels whose proxies copy their "
                              "batches); the runtime runs " +
                              std::to_string(rt.threads()) + " (at most " + std::to_string(rt.thread_limit()) + ")";
  EXPECT_NE(p.plan().find(running), std::string::npos) << p.plan();
  p.wait(60s);
}

} // namespace

TEST(HostThreads, AStartedPipelinesHostStagesRunAtOnce) {
  runtime_options o;
  o.host_cores = chains; // whatever this host has: the runtime grows to 3 threads for 6 stages
  runtime rt(topology::from_devices({}), o);
  meeting meet(chains, 10s);
  std::uint32_t received[chains] = {}, misordered[chains] = {};
  run_chains(rt, meet, received, misordered);
  EXPECT_EQ(rt.threads(), chains);
  EXPECT_EQ(meet.met(), chains) << "the three sources never ran at once";
  for (unsigned c = 0; c < chains; ++c) {
    EXPECT_EQ(received[c], per_chain) << "chain " << c;
    EXPECT_EQ(misordered[c], 0u) << "chain " << c;
  }
}

// Threads the application fixed are kept: the same stages take turns, and every message still
// arrives once, in order (two sources' first calls wait out their meeting).
TEST(HostThreads, FixedThreadsAreKept) {
  runtime_options o;
  o.threads = 2;
  o.host_cores = chains;
  runtime rt(topology::from_devices({}), o);
  meeting meet(chains, 200ms);
  std::uint32_t received[chains] = {}, misordered[chains] = {};
  run_chains(rt, meet, received, misordered);
  EXPECT_EQ(rt.threads(), 2u);
  EXPECT_LT(meet.met(), chains);
  for (unsigned c = 0; c < chains; ++c) {
    EXPECT_EQ(received[c], per_chain) << "chain " << c;
    EXPECT_EQ(misordered[c], 0u) << "chain " << c;
  }
}

// A host function that runs a pipeline of its own on the same runtime, fixed at one io thread:
// the inner pipeline's stages run on a stand-in while that thread waits in run()
// (runtime::stand_in_thread); without it run() waited out its timeout.
TEST(HostThreads, AHostFunctionRunsAPipelineOnARuntimeOfOneThread) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  std::uint32_t inner_received = 0, outer_received = 0;
  std::string inner_error;
  pipeline outer(rt, {"outer"});
  auto src = outer.add_source<item>("src", [sent = std::uint32_t{0}]() mutable -> std::optional<item> {
    if (sent == 3) return std::nullopt;
    return item{sent++};
  });
  auto sink = outer.add_sink<item>("sink", [&](const item&) {
    ++outer_received;
    pipeline inner(rt, {"inner"});
    auto isrc = inner.add_source<item>("isrc", [sent = std::uint32_t{0}]() mutable -> std::optional<item> {
      if (sent == per_chain) return std::nullopt;
      return item{sent++};
    });
    auto isink = inner.add_sink<item>("isink", [&](const item&) { ++inner_received; });
    inner.connect(isrc.out(), isink.in());
    try {
      inner.run(10s);
    } catch (const std::exception& e) {
      inner_error = e.what();
    }
  });
  outer.connect(src.out(), sink.in());
  outer.run(60s);
  EXPECT_EQ(inner_error, "");
  EXPECT_EQ(outer_received, 3u);
  EXPECT_EQ(inner_received, 3 * per_chain);
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs";
}

// A host function that blocks in a ring's pop, on an outlet another pipeline of the same runtime
// (fixed at one io thread) fills: the feeder's source runs on a stand-in while the pop sleeps
// (detail::blocked_wait); without it the pop timed out, failing the run.
TEST(HostThreads, AHostFunctionBlockedInARingsPopGetsAStandIn) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  pipeline feeder(rt, {"feeder"});
  auto fsrc = feeder.add_source<item>("fsrc", [sent = std::uint32_t{0}]() mutable -> std::optional<item> {
    if (sent == per_chain) return std::nullopt;
    return item{sent++};
  });
  auto fout = feeder.add_outlet<item>("out");
  feeder.connect(fsrc.out(), fout.in());
  pipeline outer(rt, {"outer"});
  auto src = outer.add_source<item>("src", [sent = std::uint32_t{0}]() mutable -> std::optional<item> {
    if (sent == 4) return std::nullopt;
    return item{sent++};
  });
  std::uint32_t popped = 0, misordered = 0, closed_early = 0;
  std::optional<ring<item>> from; // the feeder's outlet, once it has started
  auto sink = outer.add_sink<item>("sink", [&](const item&) {
    for (std::uint32_t i = 0; i < per_chain / 4; ++i) {
      item m{};
      if (!from->pop(m, 10s)) { // throws (failing the run) after 10 s
        ++closed_early;
        return;
      }
      misordered += m.seq != popped ? 1 : 0;
      ++popped;
    }
  });
  outer.connect(src.out(), sink.in());
  feeder.start();
  from = feeder.outlet<item>("out");
  outer.run(60s);
  feeder.wait(10s);
  EXPECT_EQ(closed_early, 0u);
  EXPECT_EQ(popped, per_chain);
  EXPECT_EQ(misordered, 0u);
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs";
}

// Two host functions that meet at a barrier on a runtime of one io thread: the first to arrive
// waits on a stand-in's turn for the second (detail::blocked_wait in barrier::wait); without it
// every phase failed after the barrier's timeout.
TEST(HostThreads, HostFunctionsMeetAtABarrierOnARuntimeOfOneThread) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  barrier_options bo;
  bo.timeout = 10s;
  barrier meet({"a", "b"}, bo);
  constexpr std::uint32_t phases = 20;
  std::string failure;
  pipeline p(rt, {"meet"});
  for (const char* name : {"a", "b"}) {
    auto src = p.add_source<item>(
        std::string("src-") + name,
        [&, name, seat = meet.participant(name), sent = std::uint32_t{0}]() mutable -> std::optional<item> {
          if (sent == phases) return std::nullopt;
          try {
            meet.arrive_and_wait(seat);
          } catch (const std::exception& e) {
            failure = std::string(name) + ": " + e.what();
            return std::nullopt;
          }
          return item{sent++};
        });
    auto sink = p.add_sink<item>(std::string("sink-") + name, [](const item&) {});
    p.connect(src.out(), sink.in());
  }
  p.run(60s);
  EXPECT_EQ(failure, "");
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs";
}

namespace {

// A batch source that makes nothing until `ready()`, then sets `answer` and sends one item: it
// cannot answer before the host function that waits for it has started waiting.
template <class Ready> auto answer_once(Ready ready, std::promise<std::uint32_t>& answer) {
  return [&answer, ready = std::move(ready),
          answered = false](std::span<item> room) mutable -> std::optional<std::size_t> {
    if (answered) return std::nullopt;
    if (!ready()) return 0;
    answer.set_value(42);
    answered = true;
    room[0] = item{42};
    return 1;
  };
}

auto when_set(const std::atomic<bool>& flag) {
  return [&flag] { return flag.load(); };
}

// In `p`: a stage "answering" that sets `reply` once `ready()`, and a sink "asking" that calls
// `ask()` once.
template <class Ready, class Ask>
void add_question(pipeline& p, Ready ready, std::promise<std::uint32_t>& reply, Ask ask) {
  auto answering = p.add_source_batch<item>("answering", answer_once(std::move(ready), reply));
  auto drop = p.add_sink<item>("drop", [](const item&) {});
  p.connect(answering.out(), drop.in());
  auto src = p.add_source<item>("src", [sent = std::uint32_t{0}]() mutable -> std::optional<item> {
    if (sent == 1) return std::nullopt;
    return item{sent++};
  });
  auto asking = p.add_sink<item>("asking", [ask = std::move(ask)](const item&) mutable { ask(); });
  p.connect(src.out(), asking.in());
}

} // namespace

// A host function waiting on a future of its own that another stage of the same runtime (fixed at
// one io thread) fulfils: in a blocking_scope that stage runs on a stand-in; without it the wait
// lasted its whole 10 s and the answering stage never ran.
TEST(HostThreads, AHostFunctionsOwnWaitInABlockingScopeGetsAStandIn) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  std::atomic<bool> asking{false};
  std::promise<std::uint32_t> reply;
  auto answer = reply.get_future();
  pipeline p(rt, {"ask"});
  auto status = std::future_status::deferred;
  add_question(p, when_set(asking), reply, [&] {
    asking = true;
    status = call_blocking([&] { return answer.wait_for(10s); });
  });
  p.run(60s);
  ASSERT_EQ(status, std::future_status::ready) << "the answering stage did not run while 'asking' waited";
  EXPECT_EQ(answer.get(), 42u);
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs";
}

// A ring's blocking pop inside a blocking_scope (the ring's own wait nested in the user's): the
// stand-in the scope took stays through the pop (the runtime counts it while the feeder runs)
// and the scope's own wait after the pop is answered.
TEST(HostThreads, ARingsWaitNestedInABlockingScopeKeepsTheStandIn) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  std::atomic<bool> popping{false}, popped{false};
  std::promise<std::uint32_t> reply;
  auto answer = reply.get_future();
  pipeline feeder(rt, {"feeder"});
  // The feeder sends 20 ms after the pop began, so that the pop has gone to sleep (spins and
  // yields first) and told the runtime, inside the scope.
  std::promise<std::uint32_t> fed;
  // It notes the io threads running as it sends: the asking thread and the scope's stand-in.
  unsigned threads_while_popping = 0;
  auto after_the_pop_sleeps = [&, seen = std::optional<std::chrono::steady_clock::time_point>()]() mutable {
    if (!popping.load()) return false;
    if (!seen) seen = std::chrono::steady_clock::now();
    if (std::chrono::steady_clock::now() - *seen < 20ms) return false;
    threads_while_popping = rt.threads();
    return true;
  };
  auto fsrc = feeder.add_source_batch<item>("fsrc", answer_once(after_the_pop_sleeps, fed));
  auto fout = feeder.add_outlet<item>("out");
  feeder.connect(fsrc.out(), fout.in());
  pipeline p(rt, {"ask"});
  std::optional<ring<item>> from;
  std::string failure;
  auto status = std::future_status::deferred;
  add_question(p, when_set(popped), reply, [&] {
    const blocking_scope scope;
    popping = true;
    item m{};
    try {
      if (!from->pop(m, 10s)) failure = "the feeder's outlet closed";
    } catch (const std::exception& e) {
      failure = e.what();
      return;
    }
    popped = true;
    status = answer.wait_for(10s);
  });
  feeder.start();
  from = feeder.outlet<item>("out");
  p.run(60s);
  feeder.stop();
  EXPECT_EQ(failure, "");
  // Where the pop's wait let the scope's stand-in go, a parked thread ran the feeder only as the
  // relief of a thread held in a step for 10 ms, the runtime counting one thread.
  EXPECT_EQ(threads_while_popping, 2u) << "the scope's stand-in did not run through the pop inside it";
  EXPECT_EQ(status, std::future_status::ready) << "no stand-in ran the answering stage after the pop";
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs";
}
