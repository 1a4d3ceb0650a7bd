#include <ringpipe/runtime.hpp>

#include "io_step.hpp"
#include "thread_name.hpp"
#include "transfer_service.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/detail/blocked_wait.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <string>
#include <utility>

namespace ringpipe {

namespace {
using clock = std::chrono::steady_clock;
// The io thread this is and its runtime (null on other threads), for io_step and park().
thread_local detail::io_thread_state* this_io_thread = nullptr;
thread_local runtime* this_io_runtime = nullptr;
// Whether this io thread holds a stand-in already (a pipeline's wait() that joins its stages).
thread_local bool this_io_thread_stood_in = false;
std::int64_t ticks_now() noexcept { return clock::now().time_since_epoch().count(); }
} // namespace

namespace detail {

bool on_io_thread() noexcept { return this_io_thread != nullptr; }

io_step::io_step() noexcept {
  if (this_io_thread == nullptr || this_io_thread->step_since.load(std::memory_order_relaxed) != 0) return;
  state_ = this_io_thread, rt_ = this_io_runtime, since_ = ticks_now();
  state_->step_since.store(since_, std::memory_order_relaxed);
}

io_step::~io_step() {
  if (state_ == nullptr) return;
  state_->step_since.store(0, std::memory_order_relaxed);
  // Only a step held past the relief time may have let a parked thread out (rare: one lock then).
  if (clock::duration(ticks_now() - since_) > io_step_relief_after) rt_->held_step_returned();
}

} // namespace detail

namespace {
// The stand-in of a blocking wait on this io thread (detail::blocked_wait: a ring's blocking
// push or pop, a barrier's wait, a blocking_scope), held until the outermost such wait ends: waits
// nest (a ring's pop inside a user's blocking_scope), and an inner one must not let it go.
thread_local thread_hold blocked_wait_stand_in;
thread_local unsigned blocked_waits = 0;
void stand_in_while_blocked(void* rt) noexcept {
  if (blocked_waits++ > 0) return;
  try {
    blocked_wait_stand_in = static_cast<runtime*>(rt)->stand_in_thread();
  } catch (...) { // no thread could start: the wait goes on without one, as before
  }
}
void end_blocked_wait(void* /*rt*/) noexcept {
  if (--blocked_waits == 0) blocked_wait_stand_in = thread_hold();
}
} // namespace

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
    thread_states_.push_back(std::make_unique<detail::io_thread_state>());
    threads_.emplace_back([this, i, state = thread_states_.back().get()] {
      detail::name_this_thread("ringpipe-io-" + std::to_string(i));
      this_io_thread = state, this_io_runtime = this;
      detail::this_thread_blocking_hook() = {this, &stand_in_while_blocked, &end_blocked_wait};
      io_.run();
    });
  }
  settle_threads();
}

unsigned runtime::thread_limit() const noexcept {
  return options_.threads != 0 ? options_.threads : std::max(initial_threads_, host_cores());
}

thread_hold runtime::hold_threads(unsigned n) {
  std::lock_guard lock(threads_mutex_);
  held_ += n, ++growers_;
  if (!stopped_) start_threads(std::min(held_, thread_limit()));
  return thread_hold(this, n, thread_hold::kind::grow);
}

thread_hold runtime::narrow_threads() {
  std::lock_guard lock(threads_mutex_);
  ++narrowed_;
  if (!stopped_) settle_threads();
  return thread_hold(this, 0, thread_hold::kind::narrow);
}

thread_hold runtime::stand_in_thread() {
  if (this_io_runtime != this || this_io_thread_stood_in) return {}; // one thread blocks once
  auto hold = add_stand_in(thread_hold::kind::stand_in);
  this_io_thread_stood_in = hold.rt_ != nullptr;
  return hold;
}

thread_hold runtime::task_stand_in() {
  if (this_io_runtime != this) return {};
  return add_stand_in(thread_hold::kind::task);
}

thread_hold runtime::add_stand_in(thread_hold::kind k) {
  std::lock_guard lock(threads_mutex_);
  if (stopped_) return {};
  ++stand_ins_;
  // A parked thread is let go (settle); where none is, one more starts.
  if (threads_wanted() > threads_.size())
    start_threads(threads_wanted());
  else
    settle_threads();
  return thread_hold(this, 0, k);
}

void runtime::release_threads(unsigned n, thread_hold::kind k) noexcept {
  std::lock_guard lock(threads_mutex_);
  switch (k) {
  case thread_hold::kind::narrow: narrowed_ -= std::min(narrowed_, 1u); break;
  case thread_hold::kind::stand_in: // released on the thread that took it (a scoped hold)
    stand_ins_ -= std::min(stand_ins_, 1u);
    this_io_thread_stood_in = false;
    break;
  case thread_hold::kind::task: stand_ins_ -= std::min(stand_ins_, 1u); break;
  case thread_hold::kind::grow:
    held_ -= std::min(held_, n);
    growers_ -= std::min(growers_, 1u);
    break;
  }
  if (!stopped_) settle_threads();
}

void runtime::settle_threads() {
  const auto all = static_cast<unsigned>(threads_.size());
  const unsigned wanted = running_wanted();
  // A park handler counts as parked from its post: one not yet run that is no longer needed
  // returns as soon as it runs.
  for (; all - parked_ > wanted; ++parked_)
    boost::asio::post(io_, [this] { park(); });
  unpark_.notify_all();
  thread_count_.store(wanted, std::memory_order_release);
}

unsigned runtime::threads_wanted() const noexcept {
  // Threads the user fixed are kept; so are those a hold_threads() hold alive grew the pool for
  // (at most the limit: beyond it only stand-ins, which park again).
  const auto all = static_cast<unsigned>(threads_.size());
  const unsigned base =
      narrowed_ > 0 && growers_ == 0 && options_.threads == 0 ? 1u + relief_ : std::min(all, thread_limit());
  return base + stand_ins_;
}

unsigned runtime::running_wanted() const noexcept {
  return std::min(threads_wanted(), static_cast<unsigned>(threads_.size()));
}

void runtime::park() {
  std::unique_lock lock(threads_mutex_);
  this_io_thread->parked = true;
  // Let go once this thread running again keeps the running ones within what the holds ask, or
  // while a running one is held in a step (the other stages would wait for it).
  while (!stopped_ && threads_.size() - parked_ >= running_wanted()) {
    if (unpark_.wait_for(lock, detail::io_step_relief_after) == std::cv_status::timeout && held_in_steps() > relief_) {
      ++relief_;
      thread_count_.store(running_wanted(), std::memory_order_release);
      break;
    }
  }
  this_io_thread->parked = false;
  --parked_;
}

unsigned runtime::held_in_steps() const {
  const std::int64_t now = ticks_now();
  const auto held_since = now - clock::duration(detail::io_step_relief_after).count();
  unsigned held = 0;
  for (const auto& t : thread_states_) {
    const std::int64_t since = t->step_since.load(std::memory_order_relaxed);
    held += !t->parked && since != 0 && since < held_since ? 1 : 0;
  }
  return held;
}

void runtime::held_step_returned() {
  std::lock_guard lock(threads_mutex_);
  if (relief_ == 0 || stopped_) return;
  relief_ = std::min(relief_, held_in_steps());
  settle_threads(); // the threads let out beyond those still held park again
}

thread_hold::thread_hold(thread_hold&& other) noexcept
    : rt_(std::exchange(other.rt_, nullptr)), threads_(std::exchange(other.threads_, 0)), kind_(other.kind_) {}

thread_hold& thread_hold::operator=(thread_hold&& other) noexcept {
  if (this != &other) {
    if (rt_ != nullptr) rt_->release_threads(threads_, kind_);
    rt_ = std::exchange(other.rt_, nullptr);
    threads_ = std::exchange(other.threads_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

thread_hold::~thread_hold() {
  if (rt_ != nullptr) rt_->release_threads(threads_, kind_);
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
  unpark_.notify_all(); // parked threads return, and find io_ stopped
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
