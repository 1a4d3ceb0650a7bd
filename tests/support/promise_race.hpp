#pragma once
// A ring's promise of a wake as a litmus test (promised_wake_test, promised_room_test): in each
// round the other end moves its counter (a push, a pop) at a random moment on its own thread
// while this thread promises, and once the move is done a promise that found the ring waiting
// must have been woken. `promise()` and `after_round(i)` run on this thread, `move(i)` on the
// other; `wakes` counts the ring's wake callbacks.
//
// Half the moves come at once, half after a random delay of up to twice the time a promise has
// been taking (its fence's interrupts cost 1 us on one machine and 15 us on another, where a
// fixed spread of 4 us put nearly every move inside the fence and the promise was refused): the
// moves land before, inside and after the promise's fence whatever it costs.

#include "wait_for.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

namespace ringpipe::testing {

struct promise_race_result {
  int promises = 0; ///< rounds whose promise was given
  int broken = 0;   ///< of those, rounds whose move did not wake
};

template <class Promise, class Move, class AfterRound>
promise_race_result race_promises(int rounds, const std::atomic<int>& wakes, Promise promise, Move move,
                                  AfterRound after_round) {
  using clock = std::chrono::steady_clock;
  alignas(64) std::atomic<int> go{-1};
  alignas(64) std::atomic<int> moved{0};
  alignas(64) std::atomic<std::int64_t> promise_ns{1000}; // a promise's recent duration, smoothed
  std::thread other([&] {
    std::minstd_rand random(7);
    for (int i = 0; i < rounds; ++i) {
      const auto spread = 2 * promise_ns.load(std::memory_order_relaxed) + 1;
      const auto delay = std::chrono::nanoseconds(random() % 2 == 0 ? 0 : static_cast<std::int64_t>(random()) % spread);
      spin_until([&] { return go.load(std::memory_order_acquire) == i; });
      for (const auto until = clock::now() + delay; clock::now() < until;)
        detail::cpu_relax();
      move(i);
      moved.fetch_add(1, std::memory_order_release);
    }
  });
  promise_race_result result;
  for (int i = 0; i < rounds; ++i) {
    const int woken_before = wakes.load(std::memory_order_relaxed);
    go.store(i, std::memory_order_release);
    const auto t0 = clock::now();
    const bool promised = promise();
    const std::int64_t took = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count();
    promise_ns.store((7 * promise_ns.load(std::memory_order_relaxed) + took) / 8, std::memory_order_relaxed);
    spin_until([&] { return moved.load(std::memory_order_acquire) == i + 1; });
    if (promised) {
      ++result.promises;
      if (wakes.load(std::memory_order_relaxed) == woken_before) ++result.broken;
    }
    after_round(i);
  }
  other.join();
  return result;
}

} // namespace ringpipe::testing
