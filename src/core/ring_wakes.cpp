// How one end of a ring wakes the other: a consumer asleep on an empty ring is woken by the next
// host push or close, a producer asleep on a full one by the next host pop. Each end asks with a
// flag the other end looks at after it moves its counter (one load while nobody asks); an end
// idle a while asks for a promise instead (the request, a process-wide fence, a last look: see
// process_fence.hpp) and may then sleep with no timer. A ring whose other end a device's launch
// moves does not promise while that launch runs: no host call announces those moves.
#include <ringpipe/ring.hpp>

#include "process_fence.hpp"

namespace ringpipe {
namespace {

// Runs an end's callback (a proxy's or host stage's wake), copied under `m` and called outside
// it: a kernel's proxy may run a whole step there. False where none is set, or it threw (a wake
// that cannot be posted is dropped: the waiter's timer finds the move).
bool run_wake(std::mutex& m, const std::function<void()>& callback) noexcept {
  try {
    std::function<void()> wake;
    {
      std::lock_guard lock(m);
      wake = callback;
    }
    if (!wake) return false;
    wake();
    return true;
  } catch (...) {
    return false;
  }
}

void notify_sleeper(std::mutex& m, std::condition_variable& cv) noexcept {
  // Taking the sleeper's mutex orders this after its last look at the ring.
  { std::lock_guard lock(m); }
  cv.notify_all();
}

// The waiting end's request, fenced: true where `still_waiting()` after it (the other end's next
// move then sees the request and wakes).
template <class StillWaiting>
bool promise(std::atomic<bool>& wanted, const std::atomic<bool>& device_moves_other_end, StillWaiting still_waiting) {
  wanted.store(true, std::memory_order_seq_cst);
  // Marked before: no fence (its interrupts reach every core running this process, a spinning
  // kernel's too) for an end that polls anyway, at every idle step.
  if (device_moves_other_end.load(std::memory_order_seq_cst)) return false;
  if (!detail::process_wide_fence() || device_moves_other_end.load(std::memory_order_seq_cst)) return false;
  return still_waiting();
}

// Sequentially consistent, as the promise's request and look: either the promise sees the mark,
// or this sees its request (true: wake the waiter to look again).
bool mark_device_end(std::atomic<bool>& device_moves_other_end, std::atomic<bool>& wanted) noexcept {
  device_moves_other_end.store(true, std::memory_order_seq_cst);
  return wanted.load(std::memory_order_seq_cst) && wanted.exchange(false);
}

// After the host saw the launch complete: a promise that reads this sees the launch's moves.
void unmark_device_end(std::atomic<bool>& device_moves_other_end) noexcept {
  device_moves_other_end.store(false, std::memory_order_seq_cst);
}

// An application thread's sleep: promised, until the wake or `deadline` (`limit` at most, a
// safety net); otherwise up to `d`, or a wake (asked, with a timer to fall back on).
void sleep_until_woken(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, bool promised,
                       std::chrono::microseconds d, std::chrono::steady_clock::time_point deadline,
                       std::chrono::milliseconds limit) {
  if (promised)
    cv.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + limit));
  else
    cv.wait_for(lock, d);
}

} // namespace

// --- the consumer's wake ---

void ring_buffer::call_push_wake() noexcept {
  // A proxy or host stage consumes this ring: no application thread sleeps on it.
  if (!run_wake(push_wake_mutex_, push_wake_)) wake_sleeping_consumer();
}

bool ring_buffer::promise_push_wake() noexcept {
  return promise(push_wake_wanted_, device_producer_, [this] { return size() == 0 && !closed(); });
}

void ring_buffer::note_device_producer() noexcept {
  if (mark_device_end(device_producer_, push_wake_wanted_)) call_push_wake();
}

void ring_buffer::note_device_producer_returned() noexcept { unmark_device_end(device_producer_); }

void ring_buffer::wake_sleeping_consumer() noexcept { notify_sleeper(consumer_sleep_mutex_, consumer_sleep_); }

void ring_buffer::set_push_wake(std::function<void()> wake) {
  std::lock_guard lock(push_wake_mutex_);
  push_wake_ = std::move(wake);
}

void ring_buffer::set_consumer_help(std::function<bool()> help) {
  std::lock_guard lock(push_wake_mutex_);
  consumer_help_ = std::move(help);
}

bool ring_buffer::call_consumer_help() noexcept {
  try {
    std::function<bool()> help;
    {
      std::lock_guard lock(push_wake_mutex_);
      help = consumer_help_;
    }
    return help && help(); // outside the lock: a whole step of the producer's proxy runs here
  } catch (...) {
    return false;
  }
}

void ring_buffer::sleep_as_consumer(std::chrono::microseconds d,
                                    std::chrono::steady_clock::time_point deadline) noexcept {
  std::unique_lock lock(consumer_sleep_mutex_);
  consumer_waits_.store(true, std::memory_order_seq_cst);
  // Idle a while: the push, close or cancel that ends the wait wakes it, where that is certain.
  const bool promised = d >= backoff::longest_sleep && promise_push_wake();
  if (!promised) want_push_wake();
  // Asked, then looked: a push or close after this look wakes the sleep below (the waker takes
  // the mutex first); one that raced a request not promised is found when the sleep ends.
  if (size() != 0 || closed() || cancelled() || help_offered_.load(std::memory_order_seq_cst)) return;
  sleep_until_woken(lock, consumer_sleep_, promised, d, deadline, promised_sleep_limit);
}

// --- the producer's wake ---

void ring_buffer::call_pop_wake() noexcept {
  if (!run_wake(pop_wake_mutex_, pop_wake_)) wake_sleeping_producer();
}

bool ring_buffer::promise_pop_wake(std::uint32_t room) noexcept {
  return promise(pop_wake_wanted_, device_consumer_,
                 [this, room] { return capacity_ - size() < room && !cancelled(); });
}

void ring_buffer::note_device_consumer() noexcept {
  if (mark_device_end(device_consumer_, pop_wake_wanted_)) call_pop_wake();
}

void ring_buffer::note_device_consumer_returned() noexcept { unmark_device_end(device_consumer_); }

void ring_buffer::wake_sleeping_producer() noexcept { notify_sleeper(producer_sleep_mutex_, producer_sleep_); }

void ring_buffer::set_pop_wake(std::function<void()> wake) {
  std::lock_guard lock(pop_wake_mutex_);
  pop_wake_ = std::move(wake);
}

void ring_buffer::sleep_as_producer(std::chrono::microseconds d,
                                    std::chrono::steady_clock::time_point deadline) noexcept {
  std::unique_lock lock(producer_sleep_mutex_);
  // Idle a while: the pop or cancel that ends the wait wakes it, where that is certain.
  const bool promised = d >= backoff::longest_sleep && promise_pop_wake();
  if (!promised) want_pop_wake();
  // Asked, then looked: a pop, close or cancel after this look wakes the sleep below.
  if (size() != capacity_ || cancelled() || closed()) return;
  sleep_until_woken(lock, producer_sleep_, promised, d, deadline, promised_sleep_limit);
}

// --- either side ---

void ring_buffer::cancel(std::string reason) noexcept {
  {
    std::lock_guard lock(cancel_mutex_);
    if (cancelled_.load(std::memory_order_relaxed)) return;
    cancel_reason_ = std::move(reason);
    cancelled_.store(true, std::memory_order_release);
  }
  // A push or pop asleep now sees the cancel at once.
  wake_sleeping_consumer();
  wake_sleeping_producer();
}

} // namespace ringpipe
