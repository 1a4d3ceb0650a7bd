#pragma once
// Says what a blocking step (building a kernel: the driver compiles it, Mesa sometimes for
// minutes) is waiting for, when it takes longer than runtime_options::slow_step_after, and again
// every 10 s until it ends. The step itself cannot be bounded (OpenCL calls cannot be cancelled);
// the user at least learns what the program is doing.

#include <ringpipe/runtime.hpp>

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace ringpipe::detail {

class slow_step {
public:
  slow_step(runtime& rt, std::string what) : state_(std::make_shared<state>(rt, std::move(what))) {
    if (rt.slow_step_after().count() == 0) {
      rt.notice(state_->what + " ...");
      return;
    }
    std::lock_guard lock(state_->mutex);
    arm(state_, rt.slow_step_after());
  }
  ~slow_step() {
    std::lock_guard lock(state_->mutex);
    state_->done = true;
    state_->timer.cancel();
  }
  slow_step(const slow_step&) = delete;
  slow_step& operator=(const slow_step&) = delete;

private:
  struct state {
    state(runtime& r, std::string w) : rt(r), what(std::move(w)), timer(r.io()) {}
    runtime& rt;
    std::string what;
    boost::asio::steady_timer timer;
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
    std::mutex mutex; // the timer is touched by the step's thread and the runtime's
    bool done = false;
  };

  // Called with the mutex held.
  static void arm(const std::shared_ptr<state>& s, std::chrono::milliseconds after) {
    s->timer.expires_after(after);
    s->timer.async_wait([s](const boost::system::error_code& ec) {
      std::lock_guard lock(s->mutex);
      if (ec || s->done) return;
      const auto seconds =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - s->began).count();
      s->rt.notice(s->what + ": still waiting after " + std::to_string(seconds) + " s");
      arm(s, std::chrono::seconds(10));
    });
  }

  std::shared_ptr<state> state_;
};

} // namespace ringpipe::detail
