// The actor runtime's one polling loop, stepped by hand on a manual executor: no threads, no
// sleeps, and time that moves only when the test says; and when a waiter spins at all.

#include "../src/actor/poller.hpp"
#include "manual_executor.hpp"

#include <ringpipe/backoff.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

using namespace ringpipe::detail;
using ringpipe::testing::manual_executor;
using namespace std::chrono_literals;

namespace {

// A waiter spins only while the thread it waits for can run beside it: not on a process bound
// to one CPU (two MPI ranks on two cores), nor while busy pollers take the other CPUs.
TEST(Backoff, SpinsOnlyWhileTheThreadItWaitsForHasACpuOfItsOwn) {
  EXPECT_TRUE(spinning_helps(2, 0));
  EXPECT_FALSE(spinning_helps(1, 0));
  EXPECT_FALSE(spinning_helps(2, 1));
  EXPECT_TRUE(spinning_helps(4, 2));
  auto& pollers = busy_pollers();
  EXPECT_EQ(ringpipe::backoff().spins(), usable_cpus() > 1);
  pollers += usable_cpus();
  EXPECT_FALSE(ringpipe::backoff().spins());
  pollers -= usable_cpus();
}

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

// Under the throughput objective a host stage's sleep after progress is paced: as long as the
// rate since its last sleep takes to bring a turn's worth (100 messages here), so that a stage
// beside a slow kernel wakes a few times per ring, not per message. A neighbour's nudge leaves a
// paced sleep alone (its timer comes when the work does); wake() (a stop) still cuts it short.
struct PacedPollerTest : PollerTest {
  std::size_t per_step = 10;
  poller paced{ex, poll_timing{0us, 50us, 1000us, 100}, [this] {
                 ++steps;
                 if (next == poll_result::progress || next == poll_result::caught_up) paced.moved(per_step);
                 return next;
               }};
};

TEST_F(PacedPollerTest, SleepsAsLongAsTheRateTakesToBringATurnsWorth) {
  paced.start(owner);
  ex->advance(40us);
  ex->run_ready(); // 10 messages in the 40 us since start: 100 take 400 us
  next = poll_result::idle;
  ex->run_ready();
  EXPECT_EQ(ex->ready(), 0u);
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(400us));
  paced.nudge();
  EXPECT_EQ(ex->ready(), 0u) << "a nudge cut a paced sleep short";
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(400us));
  // The timer's step finds work: 20 messages over the 400 us slept, so the next sleep is 2 ms,
  // held to the ceiling.
  per_step = 20;
  next = poll_result::progress;
  ex->advance(400us);
  next = poll_result::idle;
  ex->run_ready();
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(1000us));
  paced.wake();
  EXPECT_EQ(ex->ready(), 1u) << "wake() must cut any sleep short (a stop)";
}

TEST_F(PacedPollerTest, AtAHighRateTheSleepIsTheFirstAndANudgeWakesIt) {
  paced.start(owner);
  per_step = 1000;
  ex->advance(10us);
  ex->run_ready(); // 1,000 messages in 10 us: 100 take 1 us, less than the first sleep
  next = poll_result::idle;
  ex->run_ready();
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(50us));
  paced.nudge();
  EXPECT_EQ(ex->ready(), 1u) << "an unpaced sleep ignored new work";
}

// After an idle stretch, what a woken stage finds came just before the wake: the rate is counted
// from the wake, not from the start of the long sleep it cut short (which would pace the sleep
// after a burst to the ceiling and leave the burst's neighbours waiting).
TEST_F(PacedPollerTest, WokenFromAnIdleSleepItCountsFromTheWake) {
  next = poll_result::idle;
  paced.start(owner);
  ex->run_ready();    // nothing: 50 us
  ex->advance(50us);  // nothing: 100 us
  ex->advance(100us); // nothing: 200 us
  ex->advance(150us); // a burst arrives 150 us into that sleep
  paced.wake();
  next = poll_result::progress;
  ex->run_ready(); // 10 messages
  next = poll_result::idle;
  ex->advance(5us);
  ex->run_ready(); // 10 in 5 us: 100 take 50 us, the first sleep
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(50us));
}

// A paced turn that moved less than its batch took all there was: it sleeps its paced sleep at
// once instead of polling again to find nothing (half of a farm's dealer's steps beside slow
// kernels were such polls).
TEST_F(PacedPollerTest, ACaughtUpTurnSleepsItsPacedSleepWithoutPollingAgain) {
  paced.start(owner);
  next = poll_result::caught_up;
  ex->advance(40us);
  ex->run_ready(); // 10 messages in 40 us: 100 take 400 us
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(ex->ready(), 0u) << "polled again at once after a partial turn";
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(400us));
}

// A proxy whose every launch slot is taken, and whose first launch to return wakes it, has
// nothing to poll for in between: it sleeps its ceiling at once, and a wake cuts that short.
TEST_F(PollerTest, WaitingSleepsTheCeilingAtOnceAndAWakeCutsItShort) {
  p.start(owner);
  ex->run_ready(); // progress
  next = poll_result::waiting;
  ex->run_ready();
  EXPECT_EQ(ex->ready(), 0u) << "spun while waiting for a wake";
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(400us));
  ex->advance(400us); // no wake: still waiting, still the ceiling
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(400us));
  p.wake();
  EXPECT_EQ(ex->ready(), 1u);
  next = poll_result::idle;
  ex->run_ready(); // woken inside a fresh spin window
  EXPECT_EQ(ex->ready(), 1u);
}

// A step idle for a while (its last sleep was the ceiling: backed_off) whose input promised the
// next push's wake goes dormant: it sleeps dormant_sleep, a safety net only, and the push's wake
// cuts that short and starts the backoff over.
TEST_F(PollerTest, ADormantStepSleepsLongOnceBackedOffAndAWakeCutsItShort) {
  bool promised = true;
  std::vector<bool> backed_off;
  poller dozing{ex, poll_timing{0us, 50us, 200us}, [&] {
                  backed_off.push_back(dozing.backed_off());
                  return dozing.backed_off() && promised ? poll_result::dormant : poll_result::idle;
                }};
  dozing.start(owner);
  ex->run_ready();
  for (auto expected : {100us, 200us}) { // 50 us, then doubling to the ceiling
    ex->advance(ex->timer_in().value());
    EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(expected));
  }
  ex->advance(ex->timer_in().value()); // the step after a ceiling's sleep
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(dormant_sleep));
  EXPECT_EQ(backed_off, (std::vector<bool>{false, false, false, true}));
  dozing.wake();
  EXPECT_EQ(ex->ready(), 1u);
  promised = false;
  ex->run_ready();
  EXPECT_EQ(backed_off.back(), false) << "woken, the backoff starts over";
  EXPECT_EQ(ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(50us));
}

// A `waiting` sleep (all launch slots taken, a completion will wake it) is not idleness: the
// step after it, at the ceiling, has not backed off, and must not promise a dormant sleep.
TEST_F(PollerTest, AWaitingSleepIsNotBackingOff) {
  std::vector<bool> backed_off;
  poll_result result = poll_result::waiting;
  poller waiting{ex, poll_timing{0us, 50us, 200us}, [&] {
                   backed_off.push_back(waiting.backed_off());
                   return result;
                 }};
  waiting.start(owner);
  ex->run_ready();
  ex->advance(200us); // the ceiling's sleep ran out without a completion
  result = poll_result::idle;
  ex->advance(ex->timer_in().value());
  EXPECT_EQ(backed_off, (std::vector<bool>{false, false, false}));
}

// An application's push into an idle kernel's ring steps its proxy on the pushing thread: the
// step runs before run_here() returns, as a woken one (its sleep cancelled, the backoff over), and
// what follows it is the executor's, as after any step.
TEST_F(PollerTest, RunHereStepsOnTheCallingThreadAtOnce) {
  p.start(owner);
  next = poll_result::idle;
  ex->run_ready();
  ex->advance(200us); // past the spin window
  ex->run_ready();
  ASSERT_TRUE(ex->timer_in()) << "asleep";
  const int before = steps;
  next = poll_result::progress;
  p.run_here();
  EXPECT_EQ(steps, before + 1) << "the step did not run on the calling thread";
  EXPECT_FALSE(ex->timer_in()) << "the sleep was not cancelled";
  EXPECT_EQ(ex->ready(), 1u) << "progress polls again at once, on the executor";
  next = poll_result::idle;
  ex->run_ready();
  EXPECT_EQ(steps, before + 2);
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
