#pragma once
// Adaptive backoff for host-side polling: spin briefly, then yield, then sleep in growing steps,
// so that a waiting host thread answers fast when traffic flows and costs little when it stops
// (a wakeup per longest_sleep). The rings' blocking calls wait with it, and a pop (or a push) that
// reaches the longest sleep sleeps on its ring's promised wake instead (promise_push_wake,
// promise_pop_wake), costing nothing while nothing comes (or nothing leaves); an application
// thread that polls several rings itself (push_n into an inlet, pop_n from an outlet) calls wait()
// after a pass that moved nothing and reset() after one that moved something, so it leaves its
// core to the kernels it feeds. It spins only where a spin cannot hold up the thread it waits for
// (spinning_helps), and where a busy poller offers its work (the MPI link thread:
// detail::wait_helper), it takes that poller's turns for a while instead of yielding to it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <sched.h>
#include <unistd.h>

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
/// The CPUs this process may run on now (its first thread's affinity: one core per rank, as
/// mpirun binds two ranks, or the machine's); at least 1.
inline int affinity_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(getpid(), sizeof set, &set) != 0)
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, CPU_COUNT(&set));
}
/// affinity_cpus() as the process started polling: read once, spinners ask it all the time.
inline int usable_cpus() noexcept {
  static const int cpus = affinity_cpus();
  return cpus;
}

/// Threads of this process that poll all the time they have work (the MPI link engine while
/// links are open): counted so that waiters leave them a core.
inline std::atomic<int>& busy_pollers() noexcept {
  static std::atomic<int> count{0};
  return count;
}

/// A waiter's spin helps only if the thread it waits for has a CPU of its own meanwhile: the
/// process must have more CPUs than the busy pollers and the waiter. Otherwise the spin only
/// delays the thread it waits for (an application thread spinning on a rank bound to one core
/// made every message of a remote link wait for the spin to end: 21 us one way against 7).
inline bool spinning_helps(int cpus, int pollers) noexcept { return cpus > pollers + 1; }

/// What a waiter may do instead of yielding: a share of the work it may be waiting for (the MPI
/// link engine's turns, which that engine's thread then leaves to it), true if it did some.
/// Null: nothing to help with.
using wait_help = bool (*)() noexcept;
inline std::atomic<wait_help>& wait_helper() noexcept {
  static std::atomic<wait_help> help{nullptr};
  return help;
}

} // namespace detail

class backoff {
public:
  void reset() noexcept {
    round_ = first_;
    help_since_ = {};
  }
  /// Whether this wait spins before it yields (spinning_helps, when it started).
  bool spins() const noexcept { return first_ == 0; }
  /// Whether the next wait() sleeps (the spins and yields are behind it).
  bool sleeps_next() const noexcept { return round_ >= spin_rounds + yield_rounds; }
  void wait() noexcept {
    wait([](std::chrono::microseconds d) { std::this_thread::sleep_for(d); });
  }
  /// The same, sleeping with `sleep(duration)` (a waiter that can be woken early: a ring's
  /// consumer, whose producer wakes it when it publishes).
  template <class Sleep> void wait(Sleep&& sleep) noexcept {
    if (round_ < spin_rounds) {
      detail::cpu_relax();
    } else if (round_ < spin_rounds + yield_rounds) {
      // Helping keeps the waiter in this phase for up to help_for, while the engine's thread
      // naps: one thread per core polls instead of two handing it to each other for every
      // message. Every 8th help still yields, so a stage this waiter may wait for (a host stage
      // on the same core) gets the core within a few passes; a yield after every pass cost the
      // ping-pong 1 us. After help_for the waiter backs off and the engine takes its turns back.
      const auto help = detail::wait_helper().load(std::memory_order_acquire);
      bool helped = false;
      if (help != nullptr) {
        const auto now = std::chrono::steady_clock::now();
        if (help_since_ == std::chrono::steady_clock::time_point{}) help_since_ = now;
        helped = now - help_since_ < help_for && help();
      }
      if (!helped || ++helps_ % 8 == 0) std::this_thread::yield();
      if (helped) return;
    } else {
      // 5 us doubling up to 160 us: a waiting thread answers within about 0.16 ms of new work (a
      // 1,024-slot ring of small messages drains in less than that) and wakes ~6,000 times a
      // second when nothing comes.
      const auto step = std::min<unsigned>(round_ - spin_rounds - yield_rounds, 5);
      sleep(std::chrono::microseconds(5u << step)); // up to longest_sleep
    }
    ++round_;
  }

  /// The longest sleep of wait(): a waiter that sleeps it has been idle a while.
  static constexpr std::chrono::microseconds longest_sleep{160};

private:
  static constexpr unsigned spin_rounds = 256;
  static constexpr unsigned yield_rounds = 64;
  static constexpr std::chrono::microseconds help_for{500};
  // Decided when the wait starts: 0 spins first, spin_rounds starts past the spins.
  unsigned first_ =
      detail::spinning_helps(detail::usable_cpus(), detail::busy_pollers().load(std::memory_order_relaxed))
          ? 0
          : spin_rounds;
  unsigned round_ = first_;
  std::chrono::steady_clock::time_point help_since_{}; // the first help of this wait; zero: none yet
  unsigned helps_ = 0;
};

} // namespace ringpipe
