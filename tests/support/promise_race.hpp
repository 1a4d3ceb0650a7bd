#pragma once
// A ring's promise of a wake as a litmus test (promised_wake_test, promised_room_test): in each
// round the other end moves its counter (a push, a pop) at a random moment on its own thread
// while this thread promises, and once the move is done a promise that found the ring waiting
// must have been woken. `promise()` and `after_round(i)` run on this thread, `move(i)` on the
// other; `wakes` counts the ring's wake callbacks.

#include "wait_for.hpp"

#include <atomic>
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
  alignas(64) std::atomic<int> go{-1};
  alignas(64) std::atomic<int> moved{0};
  std::thread other([&] {
    std::minstd_rand random(7);
    for (int i = 0; i < rounds; ++i) {
      const unsigned spins = random() % 2 == 0 ? 0 : random() % 400; // at once, or around the fence's end
      spin_until([&] { return go.load(std::memory_order_acquire) == i; });
      for (unsigned k = 0; k < spins; ++k)
        detail::cpu_relax();
      move(i);
      moved.fetch_add(1, std::memory_order_release);
    }
  });
  promise_race_result result;
  for (int i = 0; i < rounds; ++i) {
    const int woken_before = wakes.load(std::memory_order_relaxed);
    go.store(i, std::memory_order_release);
    const bool promised = promise();
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
