#include "host_stage.hpp"

#include <algorithm>

namespace ringpipe::detail {

host_stage::host_stage(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch)
    : name_(std::move(name)), batch_(std::max<std::uint32_t>(batch, 1)),
      poller_(std::move(executor), host_stage_timing, [this] { return step(); }) {}

void host_stage::add_input(std::shared_ptr<ring_buffer> r) {
  in_size_ = r->slot_size();
  inputs_.add(std::move(r));
}

void host_stage::add_output(std::shared_ptr<ring_buffer> r, std::function<void()> wake_consumer) {
  out_size_ = r->slot_size();
  outputs_.push_back({std::move(r), std::move(wake_consumer)});
}

void host_stage::start() {
  in_buf_.resize(std::max<std::size_t>(in_size_, 1));
  out_buf_.resize(std::max<std::size_t>(std::max(out_size_, in_size_), 1));
  if (outputs_.size() > 1)
    out_block_.resize(std::size_t{batch_} * std::max<std::size_t>(std::max(out_size_, in_size_), 1));
  pace_by_rings();
  if (sleeps_until_input()) {
    const auto wake_this = [weak = weak_from_this()] {
      if (auto s = weak.lock()) s->wake();
    };
    for (const auto& in : inputs_.all())
      in->ring->set_push_wake(wake_this);
    for (const auto& out : outputs_)
      out.ring->set_pop_wake(wake_this);
  }
  poller_.start(weak_from_this());
}

void host_stage::pace_by_rings() {
  if (!paced_) return;
  // A quarter of the smallest ring (of what this stage fills it to): a neighbour filling or
  // draining it has three quarters left while this stage sleeps. And at most a quarter of a turn:
  // a stage that moves more than that per first sleep (a 16-byte stream's source or sink) sleeps
  // that, woken as before.
  std::uint32_t pace = batch_ / 4;
  for (const auto& in : inputs_.all())
    pace = std::min(pace, in->ring->capacity() / 4);
  for (const auto& out : outputs_)
    pace = std::min(pace, fill_limit(*out.ring) / 4);
  poller_.set_pace(std::max<std::uint32_t>(pace, 1));
}

void host_stage::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  poller_.wake();
}

void host_stage::wake() {
  const auto& inputs = inputs_.all();
  if (std::any_of(inputs.begin(), inputs.end(), [](const auto& in) { return in->ring->closed(); }))
    poller_.wake();
  else
    poller_.nudge();
}

void host_stage::kernel_published(const ring_buffer& r, bool feeds_kernel) {
  // What the kernel has left before it waits on this stage: messages to take, or room to fill.
  const std::uint32_t left = feeds_kernel ? r.size() : r.capacity() - r.size();
  if (left <= (feeds_kernel ? fill_limit(r) : r.capacity()) / 4)
    poller_.wake();
  else
    wake();
}

bool host_stage::wait_exited(std::chrono::nanoseconds timeout) const {
  std::unique_lock lock(mutex_);
  return exited_cv_.wait_for(lock, timeout, [&] { return exited.load(std::memory_order_acquire); });
}

namespace {
// The stage whose host function this thread is in (watched_run), for a stop called from inside.
thread_local const host_stage* in_function = nullptr;
} // namespace

host_stage::watched_run::watched_run(host_stage& s, run_progress& p, bool from_window) noexcept
    : s_(s), outer_(in_function) {
  p.stopped = &s.stop_;
  s.run_ = &p;
  s.run_from_window_ = from_window;
  in_function = &s;
}

host_stage::watched_run::~watched_run() {
  s_.run_ = nullptr;
  in_function = outer_;
}

bool host_stage::in_function_on_this_thread() const noexcept { return in_function == this; }

host_stage::run_at_stop host_stage::stop_inside_turn() noexcept {
  if (!in_function_on_this_thread() || run_ == nullptr) return {};
  run_->stopped_inside = true;
  // A per-message function holds one message (at_risk), a batch function its whole batch.
  return {run_from_window_ ? inputs_.last_read() : nullptr, run_from_window_ ? run_->taken + run_->at_risk : 0,
          run_->made};
}

void host_stage::leave() {
  {
    std::lock_guard lock(mutex_);
    exited.store(true, std::memory_order_release);
  }
  exited_cv_.notify_all();
  if (on_exit) on_exit();
}

poll_result host_stage::step() {
  if (stop_.load(std::memory_order_acquire)) {
    leave();
    return poll_result::done;
  }
  std::size_t moved = 0;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    moved = turn();
    if (moved > 0) {
      poller_.moved(moved);
      busy_ns.fetch_add(static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count()),
                        std::memory_order_relaxed);
      batches.fetch_add(1, std::memory_order_relaxed);
      for (auto& out : outputs_)
        if (out.wake_consumer) out.wake_consumer();
    }
  } catch (...) {
    failed.store(true, std::memory_order_release);
    if (on_failure) on_failure(std::current_exception());
    leave();
    return poll_result::done;
  }
  if (finished.load(std::memory_order_relaxed)) {
    leave();
    return poll_result::done;
  }
  if (moved == 0) return may_sleep() ? poll_result::dormant : poll_result::idle;
  // Paced, a turn that moved less than its batch took all there was (or all the room): a poll at
  // once would find nothing, so it sleeps its paced sleep now.
  return paced_ && moved < batch_ ? poll_result::caught_up : poll_result::progress;
}

bool host_stage::may_sleep() {
  if (!sleeps_until_input() || !poller_.backed_off()) return false;
  // Nothing queued: asleep until a push, where each input promises one.
  if (!inputs_.all().empty() && inputs_.queued() == 0) return inputs_.promise_push_wakes();
  // Held by full outputs (or a source by its output): asleep until a pop, where each full one
  // promises one. Idle for another reason (nothing full): it keeps polling.
  bool held = false;
  for (const auto& out : outputs_) {
    if (out.ring->size() < out.ring->capacity()) continue;
    if (!out.ring->promise_pop_wake()) return false;
    held = true;
  }
  return held;
}

host_stage::run_space host_stage::out_run(std::size_t max) {
  max = std::min<std::size_t>(max, batch_);
  if (outputs_.size() == 1) {
    const auto window = outputs_[0].ring->write_window(max);
    return {window.data(), window.size() / out_size_};
  }
  for (const auto& o : outputs_)
    max = std::min<std::size_t>(max, o.ring->space());
  return {out_block_.data(), max};
}

void host_stage::push_run(std::size_t n) {
  if (n == 0) return;
  if (outputs_.size() == 1) {
    outputs_[0].ring->commit_push(n);
  } else {
    for (auto& o : outputs_)
      (void)o.ring->push_n_bytes(out_block_.data(), n); // room was checked; only this stage pushes
  }
  msgs_out.fetch_add(n, std::memory_order_relaxed);
}

void host_stage::lose_at_throw(const run_progress& p) {
  take_run(p.taken + p.at_risk);
  lost.fetch_add(p.at_risk, std::memory_order_relaxed);
}

void host_stage::end_stream() {
  for (auto& o : outputs_) {
    o.ring->close();
    if (o.wake_consumer) o.wake_consumer();
  }
  finished.store(true, std::memory_order_release);
}

} // namespace ringpipe::detail
