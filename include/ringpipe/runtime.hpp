#pragma once
// The host-side runtime: the devices, a Boost.Asio io_context with a small thread pool, and the
// executors that kernel proxies and host stages run on.

#include <ringpipe/topology.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>
#include <vector>

namespace ringpipe {

struct runtime_options {
  unsigned threads = 2; ///< threads running the io_context
};

class runtime {
public:
  explicit runtime(topology devices = topology::discover(), runtime_options options = {});
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  const topology& devices() const noexcept { return topology_; }
  const device& device_at(std::size_t i) const { return topology_[i]; }
  boost::asio::io_context& io() noexcept { return io_; }
  boost::asio::io_context::executor_type executor() noexcept { return io_.get_executor(); }

private:
  topology topology_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

} // namespace ringpipe
