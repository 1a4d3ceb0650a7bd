// The rank's link thread: turns every task in order, paces itself when none moved anything, and
// sleeps without polling while there is no task at all. Threads waiting on rings may take its
// turns (help()); it stands down while they do.

#include "link_engine.hpp"

#include "../core/thread_name.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>

namespace ringpipe::mpi::detail {
namespace {

using clock = std::chrono::steady_clock;
// The engine's thread leaves the turns to helpers while one took a pass this recently, and looks
// again after a nap this long: work that no waiter turns (a message pushed by a thread that then
// goes on with something else) waits for the engine 300 us at most, as after its idle pacing's
// sleeps. Naps of 50 us made the ping-pong's p99 25 us (each wake takes the core from the
// helper), of 1 ms 15 us.
constexpr std::chrono::microseconds helpers_hold_for{100}, stand_down_nap{200};

std::atomic<link_engine*> helped_engine{nullptr}; // the engine waiters help (one world per process)
std::atomic<int> helpers_inside{0};               // helpers that may hold helped_engine's value

bool help_the_engine() noexcept {
  helpers_inside.fetch_add(1);
  auto* e = helped_engine.load();
  const bool helped = e != nullptr && e->help();
  helpers_inside.fetch_sub(1);
  return helped;
}

std::int64_t now_ns() noexcept { return clock::now().time_since_epoch().count(); }

} // namespace

link_engine::~link_engine() {
  link_engine* self = this;
  if (helped_engine.compare_exchange_strong(self, nullptr)) {
    ringpipe::detail::wait_helper().store(nullptr);
    while (helpers_inside.load() != 0) // one that read this engine before it was withdrawn
      std::this_thread::yield();
  }
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  added_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard turn(turn_); // a helper still in a pass
  for (auto* t : tasks_)
    t->retired();
  for (auto* t : added_) // added after the thread left (never, in a correct program)
    t->retired();
}

void link_engine::add(engine_task& task) {
  {
    std::lock_guard lock(mutex_);
    added_.push_back(&task);
    tasks_open_.fetch_add(1, std::memory_order_acq_rel);
    if (!thread_.joinable()) {
      thread_ = std::thread([this] {
        ringpipe::detail::name_this_thread("ringpipe-mpi");
        run();
      });
      link_engine* none = nullptr;
      if (helped_engine.compare_exchange_strong(none, this))
        ringpipe::detail::wait_helper().store(&help_the_engine, std::memory_order_release);
    }
  }
  added_cv_.notify_all();
}

bool link_engine::help() noexcept {
  if (tasks_open_.load(std::memory_order_acquire) == 0) return false;
  std::unique_lock turn(turn_, std::try_to_lock);
  if (!turn.owns_lock()) return false; // the engine's thread, or another helper, is taking a pass
  helped_at_.store(now_ns(), std::memory_order_release);
  (void)pass();
  return true;
}

bool link_engine::helped_lately() const noexcept {
  const auto at = helped_at_.load(std::memory_order_acquire);
  return at != 0 && now_ns() - at < std::chrono::nanoseconds(helpers_hold_for).count();
}

bool link_engine::pass() noexcept {
  {
    std::lock_guard lock(mutex_);
    for (auto* t : added_)
      idle_spin_ = std::max(idle_spin_, t->idle_spin());
    tasks_.insert(tasks_.end(), added_.begin(), added_.end());
    added_.clear();
  }
  bool moved = false;
  for (std::size_t i = 0; i < tasks_.size();) {
    engine_task* t = tasks_[i];
    moved = t->turn() || moved;
    if (!t->ended()) {
      ++i;
      continue;
    }
    tasks_.erase(tasks_.begin() + static_cast<std::ptrdiff_t>(i));
    tasks_open_.fetch_sub(1, std::memory_order_acq_rel);
    t->retired(); // last: its owner may destroy it now
  }
  return moved;
}

void link_engine::run() {
  pacer pace;
  bool polling = false; // counted among the process's busy pollers (waiters leave it a core)
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (tasks_open_.load(std::memory_order_acquire) == 0) {
        if (polling) ringpipe::detail::busy_pollers().fetch_sub(1, std::memory_order_relaxed);
        polling = false;
        added_cv_.wait(lock, [&] { return quit_ || tasks_open_.load(std::memory_order_acquire) > 0; });
        pace.progress();
      }
      if (quit_) break;
    }
    if (!polling) ringpipe::detail::busy_pollers().fetch_add(1, std::memory_order_relaxed);
    polling = true;
    if (helped_lately()) { // a waiter takes the turns: leave it the core
      stand_downs_.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(stand_down_nap);
      pace.progress(); // and answer at once once it stops
      continue;
    }
    bool moved = false;
    {
      std::lock_guard turn(turn_);
      moved = pass();
      pace.keep_spinning(idle_spin_);
    }
    if (moved)
      pace.progress();
    else
      pace.idle();
  }
  if (polling) ringpipe::detail::busy_pollers().fetch_sub(1, std::memory_order_relaxed);
}

} // namespace ringpipe::mpi::detail
