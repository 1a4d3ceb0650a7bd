// The runtime's threads follow the cores the process may run on (mpirun binds a rank to one), grow
// while pipelines hold more for their host stages, and carry names that top -H and perf show.

#include <ringpipe/runtime.hpp>

#include "../src/core/io_step.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

using ringpipe::runtime;
using ringpipe::runtime_options;
using ringpipe::topology;

/// Runs on one of the runtime's io threads and returns that thread's name.
std::string io_thread_name(runtime& rt) {
  std::promise<std::string> name;
  boost::asio::post(rt.io(), [&] {
    char shown[16] = {};
    pthread_getname_np(pthread_self(), shown, sizeof shown);
    name.set_value(shown);
  });
  return name.get_future().get();
}

/// Restricts the process to its first usable CPU while alive (the main thread's mask is the
/// process's), as mpirun's binding does.
class one_cpu {
public:
  one_cpu() {
    EXPECT_EQ(sched_getaffinity(0, sizeof saved_, &saved_), 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &saved_)) {
        CPU_SET(c, &one);
        break;
      }
    EXPECT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  }
  ~one_cpu() { sched_setaffinity(0, sizeof saved_, &saved_); }
  one_cpu(const one_cpu&) = delete;
  one_cpu& operator=(const one_cpu&) = delete;

private:
  cpu_set_t saved_{};
};

TEST(Runtime, OneCoreGetsOneIoThreadAndIsCountedAsOne) {
  one_cpu bound;
  runtime rt(topology::from_devices({}), runtime_options{});
  EXPECT_EQ(rt.threads(), 1u);
  EXPECT_EQ(rt.host_cores(), 1u);
}

TEST(Runtime, ThreadsAndCoresAskedForAreKept) {
  one_cpu bound;
  runtime_options o;
  o.threads = 3;
  o.host_cores = 4;
  runtime rt(topology::from_devices({}), o);
  EXPECT_EQ(rt.threads(), 3u);
  EXPECT_EQ(rt.host_cores(), 4u);
}

TEST(Runtime, DefaultThreadsAreAtMostTwoAndAtMostTheCores) {
  runtime rt(topology::from_devices({}), runtime_options{});
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const auto cores = static_cast<unsigned>(CPU_COUNT(&set));
  EXPECT_EQ(rt.host_cores(), cores);
  EXPECT_EQ(rt.threads(), std::min(2u, cores));
}

TEST(Runtime, IoThreadsAreNamedForTheRuntime) {
  runtime rt(topology::from_devices({}), runtime_options{});
  EXPECT_EQ(io_thread_name(rt).rfind("ringpipe-io-", 0), 0u) << io_thread_name(rt);
}

/// Posts `n` handlers that each wait, up to `patience`, until all `n` are running at once: true if
/// they were (every one of them on a thread of its own).
bool run_at_once(runtime& rt, unsigned n, std::chrono::milliseconds patience = std::chrono::seconds(5)) {
  std::mutex mutex;
  std::condition_variable all_in;
  unsigned entered = 0, met = 0, left = 0;
  std::promise<void> done;
  for (unsigned i = 0; i < n; ++i)
    boost::asio::post(rt.io(), [&] {
      std::unique_lock lock(mutex);
      ++entered;
      all_in.notify_all();
      if (all_in.wait_for(lock, patience, [&] { return entered == n; })) ++met;
      const bool last = ++left == n;
      lock.unlock(); // before the caller may return and destroy the mutex
      if (last) done.set_value();
    });
  done.get_future().wait();
  return met == n;
}

TEST(Runtime, HoldsGrowTheThreadsToTheirSumUpToTheLimit) {
  runtime_options o;
  o.host_cores = 5;
  runtime rt(topology::from_devices({}), o);
  const unsigned first = rt.threads();
  EXPECT_EQ(rt.thread_limit(), 5u);
  {
    auto a = rt.hold_threads(2);
    EXPECT_EQ(rt.threads(), std::max(first, 2u));
    auto b = rt.hold_threads(2);
    EXPECT_EQ(rt.threads(), 4u) << "the sum of the holds alive";
    EXPECT_TRUE(run_at_once(rt, 4));
    auto c = rt.hold_threads(3);
    EXPECT_EQ(rt.threads(), 5u) << "never past the limit";
  }
  EXPECT_EQ(rt.threads(), 5u) << "threads are not stopped when holds end";
  auto again = rt.hold_threads(1);
  EXPECT_EQ(rt.threads(), 5u);
  EXPECT_TRUE(run_at_once(rt, 5));
  EXPECT_EQ(io_thread_name(rt).rfind("ringpipe-io-", 0), 0u);
}

TEST(Runtime, NarrowedToOneThreadUntilAHoldAsksForMore) {
  runtime_options o;
  o.host_cores = 3;
  runtime rt(topology::from_devices({}), o);
  { auto grow = rt.hold_threads(3); }
  ASSERT_EQ(rt.threads(), 3u);
  {
    auto narrow = rt.narrow_threads();
    EXPECT_EQ(rt.threads(), 1u);
    EXPECT_FALSE(run_at_once(rt, 2, std::chrono::milliseconds(200))) << "the others park";
    {
      auto wide = rt.hold_threads(1);
      EXPECT_EQ(rt.threads(), 3u) << "a hold that grows wins over one that narrows";
      EXPECT_TRUE(run_at_once(rt, 3));
    }
    EXPECT_EQ(rt.threads(), 1u);
    EXPECT_FALSE(run_at_once(rt, 2, std::chrono::milliseconds(200)));
  }
  EXPECT_EQ(rt.threads(), 3u);
  EXPECT_TRUE(run_at_once(rt, 3));
}

// A narrowed runtime's one running thread held in a stage's step (a user's sink that blocks):
// a parked thread runs what is queued meanwhile, and parks again once the step returns. A
// handler that is not a step (run_at_once's) lets none go, as the test above shows.
TEST(Runtime, ANarrowedRuntimeLetsAParkedThreadRunWhileAStepIsHeld) {
  runtime_options o;
  o.host_cores = 3;
  runtime rt(topology::from_devices({}), o);
  { auto grow = rt.hold_threads(3); }
  auto narrow = rt.narrow_threads();
  ASSERT_EQ(rt.threads(), 1u);
  std::promise<void> other;
  std::promise<bool> held;
  auto other_ran = other.get_future();
  auto held_saw = held.get_future();
  boost::asio::post(rt.io(), [&] {
    const ringpipe::detail::io_step step;
    held.set_value(other_ran.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  });
  boost::asio::post(rt.io(), [&] { other.set_value(); });
  EXPECT_TRUE(held_saw.get()) << "a handler queued behind a held step waited for it";
  for (int i = 0; i < 1000 && rt.threads() != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rt.threads(), 1u) << "narrowed again once the step returned";
  EXPECT_FALSE(run_at_once(rt, 2, std::chrono::milliseconds(200)));
}

TEST(Runtime, ThreadsTheUserFixedAreNotNarrowed) {
  runtime_options o;
  o.threads = 2;
  runtime rt(topology::from_devices({}), o);
  auto narrow = rt.narrow_threads();
  EXPECT_EQ(rt.threads(), 2u);
  EXPECT_TRUE(run_at_once(rt, 2));
}

TEST(Runtime, ThreadsAskedForAreNotGrown) {
  runtime_options o;
  o.threads = 1;
  o.host_cores = 8;
  runtime rt(topology::from_devices({}), o);
  auto hold = rt.hold_threads(4);
  EXPECT_EQ(rt.thread_limit(), 1u);
  EXPECT_EQ(rt.threads(), 1u);
}

TEST(Runtime, OneCoreHoldsOneThread) {
  one_cpu bound;
  runtime rt(topology::from_devices({}), runtime_options{});
  auto hold = rt.hold_threads(3);
  EXPECT_EQ(rt.threads(), 1u) << "a rank bound to one core keeps one io thread";
}

// An io thread that waits for other work on the runtime (a host function that stops its own
// pipeline waits for the other stages to leave) gets a stand-in, even where the user fixed one
// thread; the stand-in parks again once the hold ends. Off the io threads a hold does nothing.
TEST(Runtime, AnIoThreadThatWaitsOnTheRuntimeGetsAStandIn) {
  runtime_options o;
  o.threads = 1;
  runtime rt(topology::from_devices({}), o);
  { auto nothing = rt.stand_in_thread(); }
  ASSERT_EQ(rt.threads(), 1u) << "a hold off the io threads changed nothing";
  std::promise<void> other;
  std::promise<bool> waited;
  auto other_ran = other.get_future();
  auto saw = waited.get_future();
  unsigned threads_while_held = 0;
  boost::asio::post(rt.io(), [&] {
    const auto stand_in = rt.stand_in_thread();
    const auto nested = rt.stand_in_thread(); // the same blocked thread: no second stand-in
    threads_while_held = rt.threads();
    boost::asio::post(rt.io(), [&] { other.set_value(); });
    waited.set_value(other_ran.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  });
  EXPECT_TRUE(saw.get()) << "a handler queued behind a waiting io thread waited for it";
  EXPECT_EQ(threads_while_held, 2u) << "one blocked thread, one stand-in";
  for (int i = 0; i < 1000 && rt.threads() != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rt.threads(), 1u) << "the stand-in still runs after the hold ended";
  EXPECT_FALSE(run_at_once(rt, 2, std::chrono::milliseconds(200))) << "two threads run where the user fixed one";
}

} // namespace
