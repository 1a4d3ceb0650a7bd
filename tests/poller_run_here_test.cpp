// Steps run on an application thread beside the executor's (poller::run_here): a run that finds
// a step running elsewhere leaves the next to it, the owner's exclusive work waits for it, and a
// step run here looks again after progress. The executor is stepped by hand (manual_executor);
// the application is a real thread, so ThreadSanitizer runs these too.

#include "../src/actor/poller.hpp"
#include "manual_executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

using namespace ringpipe::detail;
using ringpipe::testing::manual_executor;
using namespace std::chrono_literals;

namespace {

// A poller whose step, once `hold` is set, stays inside until `release`, run here by a thread of
// its own: what the executor and the owner do meanwhile meets a step running elsewhere.
struct StepRunningElsewhereTest : ::testing::Test {
  std::shared_ptr<manual_executor> ex = std::make_shared<manual_executor>();
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  std::atomic<int> steps{0};
  std::atomic<bool> hold{false}, inside{false}, release{false};
  poll_result result = poll_result::idle;
  poller p{ex, kernel_proxy_timing, [this] {
             ++steps;
             inside.store(true);
             while (hold.load() && !release.load())
               std::this_thread::yield();
             return result;
           }};
  std::thread application;

  void start_step_elsewhere() {
    inside.store(false); // an earlier step, not held, went in and out
    hold.store(true);
    application = std::thread([this] { p.run_here(); });
    while (!inside.load())
      std::this_thread::yield();
  }
  void end_step_elsewhere() {
    release.store(true);
    application.join();
  }
};

// Steps never overlap: a run the executor starts while a step runs on an application thread
// returns without stepping, and that thread posts a run as its step ends, so nothing is lost.
TEST_F(StepRunningElsewhereTest, ARunThatFindsItLeavesTheNextToIt) {
  p.start(owner);
  ex->run_ready(); // the first step: idle, asleep
  ASSERT_EQ(steps.load(), 1);
  start_step_elsewhere();
  p.run(); // what a timer or a wake's post runs on an io thread meanwhile
  EXPECT_EQ(steps.load(), 2) << "two steps ran at once";
  end_step_elsewhere();
  EXPECT_EQ(ex->ready(), 1u) << "the run it turned away was not posted again";
  ex->run_ready();
  EXPECT_EQ(steps.load(), 3);
}

// What the owner does beside its steps (a kernel's proxy releasing its device objects once it is
// done) waits for a step that an application thread runs to end.
TEST_F(StepRunningElsewhereTest, ExclusiveWorkWaitsForIt) {
  result = poll_result::done;
  p.start(owner);
  start_step_elsewhere();
  std::atomic<bool> ran{false};
  std::thread releasing([&] { p.exclusive([&] { ran.store(true); }); });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load()) << "ran beside the step";
  end_step_elsewhere();
  releasing.join();
  EXPECT_TRUE(ran.load());
}

// A step run here whose work wakes its own poller again (nested) posts instead of recursing.
TEST(PollerRunHere, AStepRunHereThatRunsItsPollerAgainPostsInstead) {
  auto ex = std::make_shared<manual_executor>();
  auto owner = std::make_shared<int>(0);
  int steps = 0;
  poller* self = nullptr;
  poller p{ex, kernel_proxy_timing, [&] {
             if (++steps == 2) self->run_here();
             return poll_result::idle;
           }};
  self = &p;
  p.start(owner);
  ex->run_ready();
  p.run_here();
  EXPECT_EQ(steps, 2) << "the nested run_here stepped on the same thread";
  EXPECT_EQ(ex->ready(), 1u);
}

// A step run here that made progress looks again on the same thread, up to the steps asked for
// (the application thread that published a launch arms the next push's wake there): while the
// looks find nothing more, no run is left to the executor but its timer.
TEST(PollerRunHere, LooksAgainAfterProgressUpToItsSteps) {
  auto ex = std::make_shared<manual_executor>();
  auto owner = std::make_shared<int>(0);
  int steps = 0, progressing = 0;
  poller p{ex, kernel_proxy_timing, [&] { return ++steps <= progressing ? poll_result::progress : poll_result::idle; }};
  p.start(owner);
  ex->run_ready();
  ASSERT_EQ(steps, 1);
  progressing = 2; // the next step progresses, the one after finds nothing
  p.run_here(3);
  EXPECT_EQ(steps, 3) << "no second look on the calling thread after progress";
  EXPECT_EQ(ex->ready(), 0u) << "an idle look leaves the executor nothing to run at once";
  EXPECT_TRUE(ex->timer_in());
  progressing = 100; // every step progresses: three looks here, then the executor's
  p.run_here(3);
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(ex->ready(), 1u);
  p.run_here();
  EXPECT_EQ(steps, 7) << "one step unless more are asked for";
}

} // namespace
