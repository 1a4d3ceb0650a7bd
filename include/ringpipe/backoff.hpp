#pragma once
// Adaptive backoff for host-side polling: spin briefly, then yield, then sleep in growing steps,
// so that a waiting host thread answers fast when traffic flows and costs nothing when it stops.
// The rings' blocking calls wait with it; an application thread that polls several rings itself
// (push_n into an inlet, pop_n from an outlet) calls wait() after a pass that moved nothing and
// reset() after one that moved something, so it leaves its core to the kernels it feeds.

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ringpipe {

namespace detail {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
} // namespace detail

class backoff {
public:
  void reset() noexcept { round_ = 0; }
  void wait() noexcept {
    if (round_ < spin_rounds) {
      detail::cpu_relax();
    } else if (round_ < spin_rounds + yield_rounds) {
      std::this_thread::yield();
    } else {
      // 5 us doubling up to 160 us: a waiting thread answers within about 0.16 ms of new work (a
      // 1,024-slot ring of small messages drains in less than that) and wakes ~6,000 times a
      // second when nothing comes.
      const auto step = std::min<unsigned>(round_ - spin_rounds - yield_rounds, 5);
      std::this_thread::sleep_for(std::chrono::microseconds(5u << step));
    }
    ++round_;
  }

private:
  static constexpr unsigned spin_rounds = 256;
  static constexpr unsigned yield_rounds = 64;
  unsigned round_ = 0;
};

} // namespace ringpipe
