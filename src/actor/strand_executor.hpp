#pragma once
// The runtime's poll executor: a strand of the runtime's io_context and a steady timer.

#include "poller.hpp"

#include "../core/io_step.hpp"

#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace ringpipe::detail {

/// While one is alive on a runtime thread, the steps that thread's wakes start are deferred to it:
/// they run on it once its current handler returns, instead of waking another runtime thread
/// while this one goes idle. A kernel's proxy holds one over its step, whose completed batch wakes
/// the stages beside it: on rusticl, add_source -> kernel -> add_sink went from 0.75-0.89 to
/// 0.96-0.99 of the inlet/outlet stream. Deferring every wake from every handler, tried, made
/// PoCL's source/sink form slower in some runs (82-154 against 257-275 M msgs/s).
class defer_wakes {
public:
  defer_wakes() noexcept : was_(active()) { active() = true; }
  ~defer_wakes() { active() = was_; }
  defer_wakes(const defer_wakes&) = delete;
  defer_wakes& operator=(const defer_wakes&) = delete;
  static bool& active() noexcept {
    static thread_local bool on = false;
    return on;
  }

private:
  bool was_;
};

class strand_executor final : public poll_executor {
public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

  explicit strand_executor(boost::asio::io_context& io) : strand_(boost::asio::make_strand(io)), timer_(strand_) {}

  clock::time_point now() const override { return clock::now(); }
  void post(poller& p) override {
    auto run = [keep = p.owner(), &p] {
      if (!keep) return;
      const io_step step; // a narrowed runtime lets a parked thread go while a step is held
      p.run();
    };
    if (defer_wakes::active() && strand_.get_inner_executor().running_in_this_thread())
      boost::asio::defer(strand_, std::move(run));
    else
      boost::asio::post(strand_, std::move(run));
  }
  void post_at(poller& p, clock::time_point when) override {
    timer_.expires_at(when);
    timer_.async_wait([keep = p.owner(), &p](const boost::system::error_code& ec) {
      if (ec || !keep) return;
      const io_step step;
      p.run();
    });
  }
  void cancel_timer() noexcept override { timer_.cancel(); }

  /// Other work that must not race with the steps (releasing device objects).
  strand_type& strand() noexcept { return strand_; }

private:
  strand_type strand_;
  boost::asio::steady_timer timer_;
};

} // namespace ringpipe::detail
