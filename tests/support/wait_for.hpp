#pragma once
// Polls `done` every 100 us until it holds or `limit` has passed: for tests that wait for another
// thread to reach a state they can only observe. True if it held in time.

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

} // namespace ringpipe::testing
