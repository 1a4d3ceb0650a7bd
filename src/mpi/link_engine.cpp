// The rank's link thread: turns every task in order, paces itself when none moved anything, and
// sleeps without polling while there is no task at all.

#include "link_engine.hpp"

#include <ringpipe/backoff.hpp>

#include <algorithm>

namespace ringpipe::mpi::detail {

link_engine::~link_engine() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  added_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto* t : added_) // added after the thread left (never, in a correct program)
    t->retired();
}

void link_engine::add(engine_task& task) {
  {
    std::lock_guard lock(mutex_);
    added_.push_back(&task);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  added_cv_.notify_all();
}

void link_engine::run() {
  std::vector<engine_task*> tasks;
  pacer pace;
  bool polling = false; // counted among the process's busy pollers (waiters leave it a core)
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (tasks.empty()) {
        if (polling) ringpipe::detail::busy_pollers().fetch_sub(1, std::memory_order_relaxed);
        polling = false;
        added_cv_.wait(lock, [&] { return quit_ || !added_.empty(); });
      }
      if (quit_) break;
      if (!added_.empty()) {
        for (auto* t : added_)
          pace.keep_spinning(t->idle_spin());
        tasks.insert(tasks.end(), added_.begin(), added_.end());
        if (!polling) ringpipe::detail::busy_pollers().fetch_add(1, std::memory_order_relaxed);
        polling = true;
        added_.clear();
        pace.progress();
      }
    }
    bool moved = false;
    for (std::size_t i = 0; i < tasks.size();) {
      engine_task* t = tasks[i];
      moved = t->turn() || moved;
      if (!t->ended()) {
        ++i;
        continue;
      }
      tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(i));
      t->retired(); // last: its owner may destroy it now
    }
    if (moved)
      pace.progress();
    else if (!tasks.empty())
      pace.idle();
  }
  if (polling) ringpipe::detail::busy_pollers().fetch_sub(1, std::memory_order_relaxed);
  for (auto* t : tasks)
    t->retired();
}

} // namespace ringpipe::mpi::detail
