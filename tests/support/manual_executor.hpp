#pragma once
// A poll executor that runs nothing by itself: a test runs the posted steps and moves time on by
// hand (no threads, no sleeps).

#include "../../src/actor/poller.hpp"

#include <deque>
#include <optional>
#include <utility>

namespace ringpipe::testing {

using detail::poll_executor;
using detail::poller;

// Records what a poller asks for; runs it when the test says.
class manual_executor final : public poll_executor {
public:
  clock::time_point now() const override { return now_; }
  void post(poller& p) override { ready_.push_back(&p); }
  void post_at(poller& p, clock::time_point when) override { timer_ = {&p, when}; }
  void cancel_timer() noexcept override { timer_.reset(); }

  std::size_t ready() const { return ready_.size(); }
  std::optional<clock::duration> timer_in() const {
    return timer_ ? std::optional(timer_->second - now_) : std::nullopt;
  }
  /// Runs the posted steps (not those they post).
  void run_ready() {
    auto batch = std::move(ready_);
    ready_.clear();
    for (auto* p : batch)
      p->run();
  }
  /// Moves time on and fires the timer if it is due.
  void advance(clock::duration d) {
    now_ += d;
    if (timer_ && timer_->second <= now_) {
      auto* p = timer_->first;
      timer_.reset();
      p->run();
    }
  }

private:
  clock::time_point now_{};
  std::deque<poller*> ready_;
  std::optional<std::pair<poller*, clock::time_point>> timer_;
};

} // namespace ringpipe::testing
