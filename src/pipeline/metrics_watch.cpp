// The periodic metrics callback: a timer that re-arms itself after each call.

#include "metrics_watch.hpp"

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <mutex>
#include <thread>

namespace ringpipe::detail {

struct metrics_watch::state : std::enable_shared_from_this<state> {
  state(runtime& r, std::string n, std::chrono::milliseconds e, take_fn t, call_fn c)
      : rt(r), name(std::move(n)), every(e), take(std::move(t)), call(std::move(c)), timer(r.executor()) {}
  runtime& rt;
  std::string name;
  std::chrono::milliseconds every;
  take_fn take;
  call_fn call;
  std::mutex mutex; // held while the callback runs: finish() and the destructor wait for it
  boost::asio::steady_timer timer;
  bool done = false;
  std::atomic<std::thread::id> calling{}; // the thread running the callback

  void arm() {
    timer.expires_after(every);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      std::lock_guard lock(self->mutex);
      if (self->done) return;
      self->deliver();
      if (!self->done) self->arm();
    });
  }
  // Calls the callback with a fresh snapshot (the caller holds `mutex`).
  void deliver() noexcept {
    calling = std::this_thread::get_id();
    try {
      call(take());
    } catch (const std::exception& e) {
      done = true;
      rt.notice("pipeline '" + name + "': its metrics callback threw, and is not called again: " + e.what());
    } catch (...) {
      done = true;
      rt.notice("pipeline '" + name + "': its metrics callback threw, and is not called again");
    }
    calling = std::thread::id{};
  }
};

metrics_watch::metrics_watch(runtime& rt, std::string name, std::chrono::milliseconds every, take_fn take, call_fn call)
    : s_(std::make_shared<state>(rt, std::move(name), every, std::move(take), std::move(call))) {
  std::lock_guard lock(s_->mutex);
  s_->arm();
}

metrics_watch::~metrics_watch() {
  if (s_->calling.load() == std::this_thread::get_id()) { // destroyed from its own callback,
    s_->done = true;                                      // whose thread holds the mutex
    return;
  }
  std::lock_guard lock(s_->mutex);
  s_->done = true;
  s_->timer.cancel();
}

void metrics_watch::finish() noexcept {
  if (s_->calling.load() == std::this_thread::get_id()) { // the callback stopped the pipeline
    s_->done = true;                                      // its thread holds the mutex
    return;
  }
  std::lock_guard lock(s_->mutex);
  if (s_->done) return;
  s_->timer.cancel();
  s_->deliver();
  s_->done = true;
}

} // namespace ringpipe::detail
