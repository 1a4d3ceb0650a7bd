// A producer held by a full ring may sleep with no timer once the ring promises the next pop's
// wake (ring_buffer::promise_pop_wake), the mirror image of promised_wake_test: a host stage or a
// kernel's proxy goes dormant, and an application thread blocked in push sleeps until the pop, so
// that a pipeline held by backpressure (nobody pops its outlet) costs nothing. The promise holds
// only where every pop is a host call that wakes (no device writes the tail) and the request is
// fenced process-wide; where the kernel offers no fence the producer keeps its timer, and these
// tests skip (promised_wake_test checks the refusal).
#include "../src/actor/stages.hpp"
#include "../src/core/process_fence.hpp"
#include "manual_executor.hpp"
#include "promise_race.hpp"
#include "test_message.hpp"
#include "wait_for.hpp"

#include <ringpipe/ring.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::manual_executor;
using ringpipe::testing::race_promises;

namespace {

using msg16 = test_message<16>;

#define REQUIRE_FENCE()                                                                                                \
  if (!detail::process_wide_fence_offered())                                                                           \
  GTEST_SKIP() << "this kernel offers no expedited membarrier: producers keep their timers"

void fill(ring_buffer& r, std::uint32_t& next) {
  for (auto m = make_test_message<16>(next); r.try_push_bytes(&m); m = make_test_message<16>(++next)) {
  }
}

TEST(PromisedRoom, APopWakesTheProducerOnceAndAPromiseLooksAtTheRingLast) {
  REQUIRE_FENCE();
  ring_buffer r(8, sizeof(msg16), {"held"});
  int wakes = 0;
  r.set_pop_wake([&] { ++wakes; });
  std::uint32_t pushed = 0;
  fill(r, pushed);
  ASSERT_EQ(pushed, 8u);
  ASSERT_TRUE(r.promise_pop_wake());
  msg16 got{};
  ASSERT_TRUE(r.try_pop_bytes(&got));
  ASSERT_TRUE(r.try_pop_bytes(&got));
  EXPECT_EQ(wakes, 1);
  EXPECT_FALSE(r.promise_pop_wake()) << "promised with room free";
  EXPECT_TRUE(r.promise_pop_wake(4)) << "a producer that waits for 4 slots, with 2 free";
  ASSERT_EQ(r.pop_n_bytes(&got, 1), 1u);
  EXPECT_EQ(wakes, 2) << "a pop of a run wakes too";
  fill(r, pushed);
  ASSERT_TRUE(r.promise_pop_wake());
  r.cancel("the test ends the stream");
  EXPECT_FALSE(r.promise_pop_wake()) << "promised on a cancelled ring";
}

// A ring kernel's launch pops its input on the device: no host pop wakes the producer, so the ring
// does not promise while it runs, and a producer that slept on an earlier promise is woken to
// learn it. Once the launch has returned, host pops are the only moves again.
TEST(PromisedRoom, ARingWhoseTailADeviceWritesPromisesOnlyBetweenLaunches) {
  REQUIRE_FENCE();
  ring_buffer r(8, sizeof(msg16), {"resident.in"});
  int wakes = 0;
  r.set_pop_wake([&] { ++wakes; });
  std::uint32_t pushed = 0;
  fill(r, pushed);
  ASSERT_TRUE(r.promise_pop_wake());
  r.note_device_consumer();
  EXPECT_EQ(wakes, 1) << "the promised producer was not told";
  EXPECT_FALSE(r.promise_pop_wake());
  EXPECT_TRUE(r.device_consumer());
  r.note_device_consumer_returned();
  EXPECT_FALSE(r.device_consumer());
  EXPECT_TRUE(r.promise_pop_wake()) << "no promise after the launch returned";
  r.note_device_consumer();
  EXPECT_EQ(wakes, 2) << "the next launch did not wake the promised producer";
}

// The handshake as a litmus test: in each round the consumer pops one message of a full ring at
// a random moment while the producer promises, and once the pop is done a promise that found the
// ring full must have been woken. Every message arrives once, in order.
TEST(PromisedRoom, RacingPopsNeverBreakAPromise) {
  REQUIRE_FENCE();
  constexpr int rounds = 100000;
  ring_buffer r(4, sizeof(msg16), {"raced"});
  std::atomic<int> wakes{0};
  r.set_pop_wake([&] { wakes.fetch_add(1, std::memory_order_relaxed); });
  std::uint32_t pushed = 0, next = 0; // next: the seq the next pop must find
  fill(r, pushed);
  const auto race = race_promises(
      rounds, wakes, [&] { return r.promise_pop_wake(); },
      [&](int) {
        msg16 got{};
        EXPECT_TRUE(r.try_pop_bytes(&got));
        EXPECT_EQ(got.seq, next++) << "lost, repeated or reordered";
      },
      [&](int) {
        if (r.pop_wake_wanted()) {
          // A request the pop came before is left: a pop takes it, so the next round starts with none.
          msg16 got{};
          ASSERT_TRUE(r.try_pop_bytes(&got));
          EXPECT_EQ(got.seq, next++);
        }
        fill(r, pushed);
      });
  EXPECT_EQ(race.broken, 0) << "promises not kept, of " << race.promises;
  EXPECT_EQ(next + r.size(), pushed);
  EXPECT_GT(race.promises, rounds / 10) << "the pops hardly ever met a promise: the race was not run";
}

// A mover stepped by hand with its output full: it backs off to its ceiling, then sleeps dormant
// on its output's promise, and the pop wakes it at once.
TEST(PromisedRoom, AHostStageHeldByAFullOutputGoesDormantAndAPopWakesIt) {
  REQUIRE_FENCE();
  auto ex = std::make_shared<manual_executor>();
  auto in = std::make_shared<ring_buffer>(8, sizeof(msg16), ring_options{"mover.in"});
  auto out = std::make_shared<ring_buffer>(8, sizeof(msg16), ring_options{"mover.out"});
  auto mover = std::make_shared<detail::mover_stage>(ex, "mover", 64);
  mover->add_input(in);
  mover->add_output(out);
  mover->start();
  std::uint32_t pushed = 0;
  fill(*in, pushed);
  const auto dormant = std::chrono::duration_cast<manual_executor::clock::duration>(detail::dormant_sleep);
  // Runs the stage until its timer is `sleep` (true) or it has stepped 100 times.
  auto idle_until = [&](manual_executor::clock::duration sleep) {
    for (int i = 0; i < 100; ++i) {
      if (ex->ready() > 0) {
        ex->advance(50us);
        ex->run_ready();
      } else if (auto t = ex->timer_in()) {
        if (*t == sleep) return true;
        ex->advance(*t);
      }
    }
    return false;
  };
  ASSERT_TRUE(idle_until(dormant)) << "the stage never went dormant on its empty input";
  fill(*in, pushed); // wakes it; its output is full
  ASSERT_EQ(pushed, 16u);
  ASSERT_TRUE(idle_until(dormant)) << "the stage held by a full output never went dormant";
  ASSERT_EQ(out->size(), 8u);
  ASSERT_EQ(in->size(), 8u) << "the input was not left queued";
  ASSERT_TRUE(out->pop_wake_wanted()) << "dormant without the output's promise";
  msg16 got{};
  ASSERT_TRUE(out->try_pop_bytes(&got));
  EXPECT_EQ(got.seq, 0u);
  EXPECT_EQ(ex->ready(), 1u) << "the pop did not wake the dormant stage";
  ex->run_ready();
  EXPECT_EQ(out->size(), 8u) << "the woken stage did not fill the slot";

  // Once a device pops the output, the stage keeps polling at its ceiling.
  out->note_device_consumer();
  EXPECT_FALSE(idle_until(dormant)) << "dormant on a ring no pop wakes";
  EXPECT_EQ(ex->timer_in(), std::optional<manual_executor::clock::duration>(detail::host_stage_timing.ceiling));
  for (std::uint32_t seq = 1; seq < pushed; ++seq) {
    while (!out->try_pop_bytes(&got)) {
      ex->advance(detail::host_stage_timing.ceiling);
      ex->run_ready();
    }
    EXPECT_EQ(got.seq, seq) << "lost, repeated or reordered";
  }
  mover->stop();
  ex->run_ready();
}

// An application thread blocked in push on a full ring sleeps on the promise and the pop still
// wakes it: measured against the promised sleep's limit of 250 ms, which a wake that never came
// would wait out.
TEST(PromisedRoom, AnApplicationBlockedInPushIsWokenByThePopAfterItsPromise) {
  REQUIRE_FENCE();
  ring<msg16> r(8, {"inlet"});
  std::uint32_t pushed = 0;
  fill(r.buffer(), pushed);
  auto fastest = std::chrono::steady_clock::duration::max();
  std::uint32_t next = 0;
  for (int round = 0; round < 3; ++round) {
    std::atomic<std::chrono::steady_clock::time_point> popped_at{};
    std::thread consumer([&] {
      std::this_thread::sleep_for(30ms); // the push has slept its backoff out and promised
      popped_at.store(std::chrono::steady_clock::now());
      msg16 got{};
      EXPECT_TRUE(r.try_pop(got));
      EXPECT_EQ(got.seq, next++) << "lost, repeated or reordered";
    });
    r.push(make_test_message<16>(pushed++), 10s);
    fastest = std::min(fastest, std::chrono::steady_clock::now() - popped_at.load());
    consumer.join();
  }
  EXPECT_EQ(r.size(), 8u);
  EXPECT_LT(fastest, 150ms) << "the push waited for its sleep's limit, not the pop";
}

} // namespace
