#pragma once
// The runtime's poll executor: a strand of the runtime's io_context and a steady timer.

#include "poller.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace ringpipe::detail {

class strand_executor final : public poll_executor {
public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

  explicit strand_executor(boost::asio::io_context& io) : strand_(boost::asio::make_strand(io)), timer_(strand_) {}

  clock::time_point now() const override { return clock::now(); }
  void post(poller& p) override {
    boost::asio::post(strand_, [keep = p.owner(), &p] {
      if (keep) p.run();
    });
  }
  void post_at(poller& p, clock::time_point when) override {
    timer_.expires_at(when);
    timer_.async_wait([keep = p.owner(), &p](const boost::system::error_code& ec) {
      if (!ec && keep) p.run();
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
