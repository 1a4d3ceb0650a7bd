// The gate that keeps input pushes from waking a kernel's proxy while a launch that takes its
// input itself runs: what is held back is handed to the launch's end, never lost.

#include "../src/kernel/input_wake_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using ringpipe::detail::input_wake_gate;

namespace {

TEST(InputWakeGate, WithNoLaunchHoldingItInputWakesTheProxy) {
  input_wake_gate gate;
  EXPECT_TRUE(gate.should_wake());
  EXPECT_FALSE(gate.ended()) << "input that woke the proxy was handed to the launch's end as well";
}

TEST(InputWakeGate, InputDuringAHeldLaunchWakesTheProxyWhenTheLaunchEnds) {
  input_wake_gate gate;
  gate.hold();
  EXPECT_FALSE(gate.should_wake());
  EXPECT_FALSE(gate.should_wake());
  EXPECT_TRUE(gate.ended()) << "a push held back was lost";
  EXPECT_FALSE(gate.ended()) << "one end, one wake";
  EXPECT_TRUE(gate.should_wake()) << "the hold outlived its launch";
}

TEST(InputWakeGate, ALaunchThatEndsWithNoInputMeanwhileWakesNobody) {
  input_wake_gate gate;
  gate.hold();
  EXPECT_FALSE(gate.ended());
}

// The proxy saw the launch return before its completion callback ran: it reads the ring next,
// so what was held back is its own to find, and the callback has nothing to wake.
TEST(InputWakeGate, AReleaseByTheProxyTakesOverWhatWasHeldBack) {
  input_wake_gate gate;
  gate.hold();
  EXPECT_FALSE(gate.should_wake());
  gate.release();
  EXPECT_FALSE(gate.ended());
  EXPECT_TRUE(gate.should_wake());
}

// A push racing the launch's end from another thread either wakes the proxy itself or is
// reported by that end. Both threads are released together in each round, many times over (for
// at most a fifth of a second: on a busy machine the rounds are slow, and fewer).
TEST(InputWakeGate, APushRacingTheEndIsNeverLost) {
  constexpr int most_rounds = 100'000;
  constexpr int finished = -2;
  input_wake_gate gate;
  std::atomic<int> go{-1}, pushed{-1};
  std::atomic<bool> woke{false};
  std::thread pusher([&] {
    for (int round = 0;; ++round) {
      int g = 0;
      while ((g = go.load()) != round && g != finished) {
      }
      if (g == finished) return;
      woke = gate.should_wake();
      pushed = round;
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  int lost = 0, round = 0;
  for (; round < most_rounds && std::chrono::steady_clock::now() < until; ++round) {
    gate.hold();
    go = round;
    const bool ended_with_input = gate.ended();
    while (pushed.load() != round) {
    }
    if (!woke && !ended_with_input) ++lost;
    gate.release(); // the proxy reads the ring before the next launch
  }
  go = finished;
  pusher.join();
  EXPECT_EQ(lost, 0) << "pushes that woke nobody in " << round << " races";
}

} // namespace
