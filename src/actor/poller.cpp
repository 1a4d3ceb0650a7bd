#include "poller.hpp"

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
  if (r == poll_result::progress || now - last_progress_ < timing_.spin_window) {
    delay_ = std::chrono::microseconds(0);
    if (!posted_.exchange(true, std::memory_order_acq_rel)) executor_->post(*this);
    return;
  }
  delay_ = delay_.count() == 0 ? timing_.first_sleep : std::min(delay_ * 2, timing_.ceiling);
  executor_->post_at(*this, now + delay_);
}

} // namespace ringpipe::detail
