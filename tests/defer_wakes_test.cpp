// The runtime's poll executor on two io threads: a wake posted from a handler under defer_wakes
// (a kernel proxy's step) runs on that handler's thread once it returns, and not on the other
// thread meanwhile; without it, or from a thread outside the io context, the idle io thread takes
// it at once.

#include "../src/actor/strand_executor.hpp"
#include "wait_for.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

using namespace ringpipe::detail;
using ringpipe::testing::wait_for;
using namespace std::chrono_literals;

namespace {

class DeferWakesTest : public ::testing::Test {
protected:
  void SetUp() override {
    // Its first step (from start) finds nothing and waits for a wake: a long sleep, no timer run.
    // It runs here, before the io threads start, so that its strand is free when a test begins: a
    // wake while the step's strand was still held would queue behind it and run on that thread,
    // whatever the test's handler defers (seen once under AddressSanitizer in CI).
    p.start(owner);
    while (steps.load() != 1)
      io.run_one();
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([this] { io.run(); });
  }
  void TearDown() override {
    work.reset();
    io.stop();
    for (auto& t : threads)
      t.join();
  }
  // Wakes the poller from a handler on an io thread, which then stays busy for `busy`; returns
  // whether the woken step ran before the handler returned. `thread` gets the handler's thread.
  bool step_ran_during_handler(bool deferring, std::chrono::milliseconds busy, std::thread::id& thread) {
    std::atomic<bool> returned{false}, during{false};
    boost::asio::post(io, [&] {
      thread = std::this_thread::get_id();
      {
        std::optional<defer_wakes> scope;
        if (deferring) scope.emplace();
        p.wake();
      }
      during = wait_for([&] { return steps.load() == 2; }, busy);
      returned = true;
    });
    EXPECT_TRUE(wait_for([&] { return returned.load() && steps.load() == 2; })) << "the woken step never ran";
    return during;
  }

  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work{io.get_executor()};
  std::vector<std::thread> threads; // two io threads, from SetUp
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  std::atomic<int> steps{0};
  std::atomic<std::thread::id> step_thread{};
  poller p{std::make_shared<strand_executor>(io), poll_timing{0us, 10s, 10s}, [this] {
             step_thread = std::this_thread::get_id();
             return ++steps == 1 ? poll_result::waiting : poll_result::done;
           }};
};

TEST_F(DeferWakesTest, AWakeUnderDeferWakesRunsOnItsThreadAfterTheHandler) {
  std::thread::id handler;
  EXPECT_FALSE(step_ran_during_handler(true, 200ms, handler)) << "the other io thread took the deferred step";
  EXPECT_EQ(step_thread.load(), handler);
}

// The control: the same wake, posted, is taken by the idle io thread while the handler runs.
TEST_F(DeferWakesTest, APostedWakeRunsOnTheIdleThreadAtOnce) {
  std::thread::id handler;
  EXPECT_TRUE(step_ran_during_handler(false, 2000ms, handler));
  EXPECT_NE(step_thread.load(), handler);
}

// Outside the io threads (the application, an OpenCL callback) there is no handler to run after:
// the wake is posted.
TEST_F(DeferWakesTest, DeferWakesOutsideTheIoThreadsPosts) {
  {
    const defer_wakes scope;
    p.wake();
  }
  EXPECT_TRUE(wait_for([&] { return steps.load() == 2; }));
  EXPECT_FALSE(defer_wakes::active()) << "the scope restores the thread's flag";
}

} // namespace
