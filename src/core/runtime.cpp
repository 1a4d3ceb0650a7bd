#include <ringpipe/runtime.hpp>

#include "thread_name.hpp"
#include "transfer_service.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>
#include <cstdio>
#include <future>
#include <string>

namespace ringpipe {

runtime::runtime(topology devices, runtime_options options)
    : options_(std::move(options)), cpus_(static_cast<unsigned>(detail::affinity_cpus())),
      topology_(std::move(devices)), work_(boost::asio::make_work_guard(io_)),
      transfers_(std::make_shared<detail::transfer_service>(topology_, io_.get_executor())) {
  device_strands_.reserve(topology_.size());
  for (std::size_t i = 0; i < topology_.size(); ++i)
    device_strands_.emplace_back(boost::asio::make_strand(io_));
  // Under mpirun each rank is bound to one core: a second io thread there only preempts the
  // first and the thread that copies MPI messages.
  const unsigned n = options_.threads != 0 ? options_.threads : std::min(2u, cpus_);
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i)
    threads_.emplace_back([this, i] {
      detail::name_this_thread("ringpipe-io-" + std::to_string(i));
      io_.run();
    });
}

runtime::~runtime() {
  // A copy's completion is posted to io_: let copies in flight end before the threads stop.
  if (!transfers_->drain_and_close(std::chrono::seconds(10)))
    notice("array copies still running after 10 s: their completions will not run");
  // Completions the drained copies posted run before the threads stop (a waiter gets its result,
  // not a broken promise): a marker posted after them has run once they have been taken.
  auto flushed = std::make_shared<std::promise<void>>();
  boost::asio::post(io_, [flushed] { flushed->set_value(); });
  flushed->get_future().wait_for(std::chrono::seconds(1));
  work_.reset();
  io_.stop();
  for (auto& t : threads_)
    t.join();
}

transfer_report runtime::transfers() const { return transfers_->report(); }

unsigned runtime::host_cores() const noexcept {
  if (options_.host_cores != 0) return options_.host_cores;
  return cpus_;
}

void runtime::notice(std::string_view text) const {
  if (options_.notice) {
    options_.notice(text);
    return;
  }
  std::fprintf(stderr, "ringpipe: %.*s\n", static_cast<int>(text.size()), text.data());
}

} // namespace ringpipe
