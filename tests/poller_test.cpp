// The actor runtime's one polling loop, stepped by hand on a manual executor: no threads, no
// sleeps, and time that moves only when the test says.

#include "../src/actor/poller.hpp"
#include "manual_executor.hpp"

#include <ringpipe/backoff.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <optional>

using namespace ringpipe::detail;
using ringpipe::testing::manual_executor;
using namespace std::chrono_literals;

namespace {

struct PollerTest : ::testing::Test {
  std::shared_ptr<manual_executor> ex = std::make_shared<manual_executor>();
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  int steps = 0;
  poll_result next = poll_result::progress;
  poller p{ex, poll_timing{100us, 50us, 400us}, [this] {
             ++steps;
             return next;
           }};
};

TEST_F(PollerTest, ProgressPollsAgainAtOnce) {
  p.start(owner);
  EXPECT_EQ(ex->ready(), 1u);
  ex->run_ready();
  ex->run_ready();
  ex->run_ready();
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(ex->ready(), 1u) << "one pending step, never more";
  EXPECT_FALSE(ex->timer_in());
}

TEST_F(PollerTest, IdleSpinsForTheWindowThenSleepsDoublingToTheCeiling) {
  p.start(owner);
  ex->run_ready(); // progress
  next = poll_result::idle;
  ex->advance(50us);
  ex->run_ready(); // inside the spin window: at once again
  EXPECT_EQ(ex->ready(), 1u);
  ex->advance(60us);
  ex->run_ready(); // past it: sleep
  EXPECT_EQ(ex->ready(), 0u);
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(50us));
  for (auto expected : {100us, 200us, 400us, 400us}) {
    ex->advance(ex->timer_in().value());
    EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(expected));
  }
  EXPECT_EQ(steps, 7);
}

// A rank bound to one core beside its MPI link thread: an idle stage's spin would hold the core
// that thread needs to bring the work that wakes the stage, so it sleeps at once.
TEST_F(PollerTest, AnIdleStageSleepsAtOnceWhereItsSpinWouldHoldABusyPollersCore) {
  ASSERT_TRUE(ringpipe::detail::spinning_helps(ringpipe::detail::usable_cpus(), 0))
      << "this test needs a second CPU (the one a busy poller takes)";
  auto& pollers = ringpipe::detail::busy_pollers();
  const int taking = ringpipe::detail::usable_cpus() - 1; // every CPU but the stage's is busy
  pollers.fetch_add(taking);
  p.start(owner);
  ex->run_ready(); // progress: at once, spin or not
  EXPECT_EQ(ex->ready(), 1u);
  next = poll_result::idle;
  ex->advance(10us);
  ex->run_ready(); // inside the spin window, but spinning would not help
  pollers.fetch_sub(taking);
  EXPECT_EQ(ex->ready(), 0u) << "spun beside a busy poller that needs the core";
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(50us));
}

TEST_F(PollerTest, WakeCutsASleepShortAndStartsTheBackoffOver) {
  p.start(owner);
  next = poll_result::idle;
  ex->run_ready();
  ex->advance(200us);
  ex->run_ready();
  ASSERT_TRUE(ex->timer_in());
  ex->advance(ex->timer_in().value()); // 100us now
  p.wake();
  p.wake(); // a second wake before the first ran posts nothing more
  EXPECT_EQ(ex->ready(), 1u);
  const int before = steps;
  ex->run_ready();
  EXPECT_EQ(steps, before + 1);
  EXPECT_EQ(ex->ready(), 1u) << "woken: inside a fresh spin window";
  EXPECT_FALSE(ex->timer_in()) << "the sleep was cancelled";
}

TEST_F(PollerTest, DoneStopsPollingForGood) {
  p.start(owner);
  next = poll_result::done;
  ex->run_ready();
  EXPECT_TRUE(p.stopped());
  p.wake();
  ex->run_ready();
  EXPECT_EQ(steps, 1) << "no step after done, even when woken";
  EXPECT_EQ(ex->ready(), 0u);
  EXPECT_FALSE(ex->timer_in());
}

} // namespace

namespace {
// A pipeline can fail (and wake its stages) while it is still starting them: a wake before
// start() posts nothing (start() posts the first step, and the owner is not set yet), and the
// first step still sees it.
TEST_F(PollerTest, WakeBeforeStartPostsNothingAndTheFirstStepSeesIt) {
  p.wake();
  EXPECT_EQ(ex->ready(), 0u);
  p.start(owner);
  EXPECT_EQ(ex->ready(), 1u);
  next = poll_result::done;
  ex->run_ready();
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(ex->ready(), 0u);
}
} // namespace
