#pragma once
// The host side of one barrier (include/ringpipe/barrier.hpp): its words, its participants, what
// the host alone knows (the failure's text, when the phase began, wait times of host
// participants), and the watcher that keeps a barrier with ring kernels from hanging.

#include "barrier_words.hpp"

#include <ringpipe/barrier.hpp>
#include <ringpipe/error.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ringpipe {

namespace detail {

using barrier_clock = std::chrono::steady_clock;

/// Phase `a` comes before phase `b`, across the 32-bit wrap.
inline bool before(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) < 0; }

// The last `capacity` wait times of one host participant, for percentiles: added by the
// participant's thread without a lock (three threads on two cores queued on the barrier's mutex
// for every sample), read by stats().
class wait_samples {
public:
  void add(double us) noexcept;
  double percentile(double p) const;

private:
  static constexpr std::size_t capacity = 4096;
  struct ring {
    std::atomic<float> us[capacity];
    std::atomic<std::size_t> added{0};
  };
  std::unique_ptr<ring> samples_ = std::make_unique<ring>();
};

struct barrier_member {
  std::string name;
  ring_kernel_base* kernel = nullptr; // a ring kernel: it arrives from its device code
  std::string device;                 // the kernel's device, for messages
  bool departed = false;              // the kernel has exited (under the mutex)
  std::function<void()> wake;         // a kernel arriving through the host: relaunch it (under the mutex)
  wait_samples waited;                // host participants only
};

} // namespace detail

struct barrier::state {
  barrier_options options;
  std::shared_ptr<detail::barrier_words> words; // kept alive by the kernels too, while they run
  std::vector<detail::barrier_member> members;
  bool has_kernels = false;
  bool has_hosts = false;   // participants that arrive from host threads
  bool has_relayed = false; // kernels that arrive through the host (relaunched on each release)
  bool waiters_spin = true; // the host's cores hold every participant that polls on them

  mutable std::mutex mutex;
  // Host waiters sleep on release_epoch, which every release and the failure advance (the phase
  // word may be a device's to advance); `sleepers` spares a release the system call when none sleeps.
  std::atomic<std::uint32_t> release_epoch{0};
  std::atomic<int> sleepers{0};
  // When the phase in progress began (its first arrival seen): phase p's if began_phase is p + 1
  // (64 bits: phase 0xffffffff too). Atomics, so that host arrivals take no lock.
  std::atomic<std::uint64_t> began_phase{0};
  std::atomic<detail::barrier_clock::rep> began_at{0};
  std::optional<detail::barrier_clock::time_point> completing_since;
  std::optional<error> failure;
  std::mutex completing; // one host completes a phase at a time

  std::thread watcher; // barriers with ring kernels: timeouts, departures, completions they ask for
  bool stopping = false;
  std::condition_variable wake_watcher;

  detail::barrier_header& header() const noexcept { return words->header(); }
  detail::barrier_seat& seat(std::size_t i) const noexcept { return words->seat(i); }
  std::string label() const { return "barrier '" + options.name + "'"; }
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(members.size()); }
  bool released_phase(std::uint32_t p) const noexcept {
    return detail::before(p, header().phase.load(std::memory_order_acquire));
  }
  bool failed() const noexcept { return header().failed.load(std::memory_order_acquire) != 0; }
  /// Phase `p` began at `now`, unless its beginning was seen already.
  void note_began(std::uint32_t p) noexcept {
    if (began_phase.load(std::memory_order_acquire) == std::uint64_t{p} + 1) return;
    began_at.store(detail::barrier_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    began_phase.store(std::uint64_t{p} + 1, std::memory_order_release);
  }
  std::optional<detail::barrier_clock::time_point> began(std::uint32_t p) const noexcept {
    if (began_phase.load(std::memory_order_acquire) != std::uint64_t{p} + 1) return std::nullopt;
    return detail::barrier_clock::time_point(detail::barrier_clock::duration(began_at.load(std::memory_order_relaxed)));
  }

  class relay_gate; // the launch_gate of a kernel arriving through the host

  /// Arrives at the phase in progress as participant `who` (a host, or a kernel through the host).
  barrier_token arrive_seat(std::size_t who);
  /// Wakes the kernels that arrive through the host, to look at their gate again.
  void wake_relayed() const;
  /// Wakes the host threads waiting for a release, after one (or the failure).
  void wake_waiters() noexcept;
  void fail(error e);
  void fail_locked(error e);
  /// The error every waiter gets once failed.
  error failure_error() const;
  /// Completes phase `p` if every participant arrived and nobody completed it yet: runs the
  /// completion function, then releases. Returns the completion's error if it threw.
  std::optional<error> complete(std::uint32_t p);
  /// What anyone waiting on phase `p` checks: the phase's start, a completion a kernel asked
  /// for, departed kernels, the timeout. Returns the deadline of phase `p`, if it has begun.
  std::optional<detail::barrier_clock::time_point> look_after(std::uint32_t p);
  error timeout_error(std::uint32_t p, detail::barrier_clock::time_point now) const;
  /// A kernel completes phases on the device (rp_barrier_arrive_last) where the host would
  /// release phases without its step: the error that says so.
  std::optional<error> misplaced_device_step() const;
  /// A participant kernel exited (its on_exit).
  void departed(std::size_t who, const std::exception_ptr& failure);
  void watch();
};

} // namespace ringpipe
