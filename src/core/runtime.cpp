#include <ringpipe/runtime.hpp>

#include "thread_name.hpp"
#include "transfer_service.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>
#include <cstdio>
#include <future>
#include <string>
#include <utility>

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
  initial_threads_ = options_.threads != 0 ? options_.threads : std::min(2u, cpus_);
  std::lock_guard lock(threads_mutex_);
  start_threads(initial_threads_);
}

void runtime::start_threads(unsigned n) {
  threads_.reserve(n);
  while (threads_.size() < n) {
    const auto i = threads_.size();
    threads_.emplace_back([this, i] {
      detail::name_this_thread("ringpipe-io-" + std::to_string(i));
      io_.run();
    });
    thread_count_.store(static_cast<unsigned>(threads_.size()), std::memory_order_release);
  }
}

unsigned runtime::thread_limit() const noexcept {
  return options_.threads != 0 ? options_.threads : std::max(initial_threads_, host_cores());
}

thread_hold runtime::hold_threads(unsigned n) {
  std::lock_guard lock(threads_mutex_);
  held_ += n;
  if (!stopped_) start_threads(std::min(held_, thread_limit()));
  return thread_hold(this, n);
}

void runtime::release_threads(unsigned n) noexcept {
  std::lock_guard lock(threads_mutex_);
  held_ -= std::min(held_, n);
}

thread_hold::thread_hold(thread_hold&& other) noexcept
    : rt_(std::exchange(other.rt_, nullptr)), threads_(std::exchange(other.threads_, 0)) {}

thread_hold& thread_hold::operator=(thread_hold&& other) noexcept {
  if (this != &other) {
    if (rt_ != nullptr) rt_->release_threads(threads_);
    rt_ = std::exchange(other.rt_, nullptr);
    threads_ = std::exchange(other.threads_, 0);
  }
  return *this;
}

thread_hold::~thread_hold() {
  if (rt_ != nullptr) rt_->release_threads(threads_);
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
  std::vector<std::thread> stopping;
  {
    std::lock_guard lock(threads_mutex_); // no hold grows the pool from here on
    stopping.swap(threads_);
    stopped_ = true;
  }
  for (auto& t : stopping)
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
