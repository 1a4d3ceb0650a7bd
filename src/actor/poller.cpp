#include "poller.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>

namespace ringpipe::detail {

void poller::start(std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  last_progress_ = executor_->now();
  posted_.store(true, std::memory_order_relaxed);
  started_.store(true, std::memory_order_release);
  executor_->post(*this);
}

void poller::wake() {
  woken_.store(true, std::memory_order_release);
  // Before start() (a pipeline failing while it starts): the first step, which start() posts,
  // sees the wake; posting here would read the owner while start() writes it.
  if (!started_.load(std::memory_order_acquire)) return;
  if (!posted_.exchange(true, std::memory_order_acq_rel)) executor_->post(*this);
}

// An idle stage's spin window holds a core (its executor re-posts at once): where that core is the
// one a busy poller needs (a rank bound to one core, beside its MPI link thread), the spin only
// delays the neighbour that would wake it, so it sleeps at once instead (a 1 MiB remote stream
// lost 200 us per frame to its source's spin).
bool poller::may_spin() noexcept {
  return spinning_helps(usable_cpus(), busy_pollers().load(std::memory_order_relaxed));
}

void poller::run() {
  posted_.store(false, std::memory_order_release);
  if (done_) return;
  if (woken_.exchange(false, std::memory_order_acq_rel)) {
    executor_->cancel_timer();
    delay_ = std::chrono::microseconds(0);
    last_progress_ = executor_->now();
  }
  const poll_result r = step_();
  if (r == poll_result::done) {
    done_ = true;
    executor_->cancel_timer();
    return;
  }
  const auto now = executor_->now();
  if (r == poll_result::progress) last_progress_ = now;
  if (r == poll_result::progress || (now - last_progress_ < timing_.spin_window && may_spin())) {
    delay_ = std::chrono::microseconds(0);
    if (!posted_.exchange(true, std::memory_order_acq_rel)) executor_->post(*this);
    return;
  }
  delay_ = delay_.count() == 0 ? timing_.first_sleep : std::min(delay_ * 2, timing_.ceiling);
  executor_->post_at(*this, now + delay_);
}

} // namespace ringpipe::detail
