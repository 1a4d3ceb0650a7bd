#pragma once
// Sleeping until a 32-bit word changes, with a timeout: Linux's futex, which std::atomic::wait
// offers without one (a waiter must wake at its deadline to report who did not arrive). A
// condition variable does the same through a mutex that every waker and waiter then takes: with
// more threads than cores, a holder preempted with it keeps everyone else waiting.

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ringpipe::detail {

/// Sleeps while `word` holds `expected`, for `timeout` at most; wake_word_waiters ends it early.
/// It may also return early for no reason: callers look again.
inline void wait_while_word_is(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                               std::chrono::nanoseconds timeout) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (timeout.count() <= 0) return;
  const timespec limit{static_cast<std::time_t>(timeout.count() / 1'000'000'000),
                       static_cast<long>(timeout.count() % 1'000'000'000)};
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, &limit, nullptr, 0);
}

/// Wakes every thread sleeping in wait_while_word_is on `word`.
inline void wake_word_waiters(std::atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

} // namespace ringpipe::detail
