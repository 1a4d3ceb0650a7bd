#pragma once
// Polls `done` every 100 us until it holds or `limit` has passed: for tests that wait for another
// thread to reach a state they can only observe. True if it held in time. spin_until: the same
// without sleeping, for the two sides of a race.

#include <ringpipe/backoff.hpp>

#include <chrono>
#include <thread>

namespace ringpipe::testing {

template <class Done> bool wait_for(Done&& done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  for (const auto until = std::chrono::steady_clock::now() + limit; !done();) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

/// Spins until `done`, yielding now and then: the two threads of a race spin on each other, and
/// where another test holds the second core a pure spin waits out a time slice every round.
template <class Done> void spin_until(Done&& done) {
  for (unsigned k = 1; !done(); ++k)
    if (k % 4096 == 0)
      std::this_thread::yield();
    else
      detail::cpu_relax();
}

} // namespace ringpipe::testing
