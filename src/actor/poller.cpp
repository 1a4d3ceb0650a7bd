#include "poller.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>
#include <utility>

namespace ringpipe::detail {

void poller::start(std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  last_progress_ = pace_from_ = executor_->now();
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

void poller::nudge() {
  if (!paced_sleep_.load(std::memory_order_acquire)) wake();
}

// An idle stage's spin window holds a core (its executor re-posts at once): where that core is the
// one a busy poller needs (a rank bound to one core, beside its MPI link thread), the spin only
// delays the neighbour that would wake it, so it sleeps at once instead (a 1 MiB remote stream
// lost 200 us per frame to its source's spin).
bool poller::may_spin() noexcept {
  return spinning_helps(usable_cpus(), busy_pollers().load(std::memory_order_relaxed));
}

std::chrono::microseconds poller::first_sleep(poll_executor::clock::time_point now) noexcept {
  auto sleep = timing_.first_sleep;
  if (const std::uint32_t pace = this->pace(); pace != 0 && paced_ != 0) {
    // The messages that came during the last sleep and the turns since, at the same rate.
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(now - pace_from_);
    const auto until_pace = took * static_cast<std::int64_t>(pace) / static_cast<std::int64_t>(paced_);
    sleep = std::clamp(until_pace, timing_.first_sleep, std::max(timing_.first_sleep, timing_.ceiling));
  }
  paced_ = 0;
  pace_from_ = now;
  return sleep;
}

void poller::run() {
  posted_.store(false, std::memory_order_release);
  run_exclusive(1);
}

void poller::run_here(unsigned steps) {
  if (!started_.load(std::memory_order_acquire)) {
    wake();
    return;
  }
  woken_.store(true, std::memory_order_release);
  run_exclusive(steps);
}

// Never waits for a step that runs elsewhere (another thread, or this one further up: a step run
// here whose work runs its own poller again): it leaves the run to that step.
void poller::run_exclusive(unsigned steps) {
  if (stepping_.exchange(true)) {
    // Told before looking again (sequentially consistent, as the holder's end): the holder either
    // sees it as it ends, or has ended and the second look takes the step.
    missed_.store(true);
    if (stepping_.exchange(true)) return;
    missed_.store(false);
  }
  {
    const step_claim claimed{stepping_};
    run_step(steps);
  }
  if (missed_.exchange(false) && !posted_.exchange(true, std::memory_order_acq_rel)) executor_->post(*this);
}

void poller::run_step(unsigned steps) {
  paced_sleep_.store(false, std::memory_order_release);
  if (done_) return;
  const bool woken = woken_.exchange(false, std::memory_order_acq_rel);
  if (woken) {
    executor_->cancel_timer();
    delay_ = std::chrono::microseconds(0);
    last_progress_ = executor_->now();
    // Woken from an idle sleep: what it finds came just now, not over the whole sleep.
    if (idle_sleep_) pace_from_ = last_progress_;
  }
  // A sleep cut short is not idleness; backing_off_ is set again below, by an idle sleep of the ceiling.
  backed_off_ = std::exchange(backing_off_, false) && !woken;
  poll_result r = step_();
  // After progress, the next look on the same thread: the one the executor would take at once.
  for (unsigned more = steps; --more > 0 && r == poll_result::progress;)
    r = step_();
  if (r == poll_result::done) {
    done_ = true;
    executor_->cancel_timer();
    return;
  }
  const auto now = executor_->now();
  if (r == poll_result::progress || r == poll_result::caught_up) {
    last_progress_ = now;
    delay_ = std::chrono::microseconds(0);
  }
  if (r == poll_result::progress ||
      (r == poll_result::idle && now - last_progress_ < timing_.spin_window && may_spin())) {
    delay_ = std::chrono::microseconds(0);
    if (!posted_.exchange(true, std::memory_order_acq_rel)) executor_->post(*this);
    return;
  }
  if (r == poll_result::dormant) {
    delay_ = dormant_sleep;
    pace_from_ = now;
    idle_sleep_ = true;
    backing_off_ = true; // the safety net's step promises again
    paced_sleep_.store(false, std::memory_order_release);
  } else if (r == poll_result::waiting) {
    // The wake comes by itself: polls in between would find nothing (a staged batch's chain, a
    // span: 40, 80, 160 us... restarted after every batch).
    delay_ = std::max(timing_.ceiling, timing_.first_sleep);
    pace_from_ = now;
    idle_sleep_ = true;
    paced_sleep_.store(false, std::memory_order_release);
  } else if (delay_.count() == 0) {
    delay_ = first_sleep(now);
    idle_sleep_ = false;
    paced_sleep_.store(delay_ > timing_.first_sleep, std::memory_order_release);
  } else {
    delay_ = std::min(delay_ * 2, timing_.ceiling);
    pace_from_ = now; // idle since: the next window counts from here
    idle_sleep_ = true;
    backing_off_ = delay_ >= timing_.ceiling;
  }
  executor_->post_at(*this, now + delay_);
}

} // namespace ringpipe::detail
