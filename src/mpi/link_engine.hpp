#pragma once
// The one thread of a rank that moves every remote link's frames: each link end is a task that
// takes a turn (never blocking) and says whether it moved anything. One thread instead of one per
// end: ranks share few cores with their pipelines, and every poller takes a turn of a core from
// the stage it waits for (six polling threads per pair of ranks made an 8-byte message take 33 us).
// A thread waiting on a ring (ringpipe::backoff) may take the engine's turns instead of yielding
// (help()); the engine's thread stands down meanwhile, so one thread per core polls, not two that
// hand the core to each other for every message.

#include "remote_frames.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ringpipe::mpi::detail {

class engine_task {
public:
  virtual ~engine_task() = default;
  /// Moves what can be moved now, without waiting: true if anything moved (or a transfer under
  /// way should be tested again at once).
  virtual bool turn() noexcept = 0;
  /// True once the task has nothing left to do; the engine then forgets it and calls retired().
  virtual bool ended() const noexcept = 0;
  /// Called on the engine's thread after the engine let go of the task: from then on the task may
  /// be destroyed by its owner.
  virtual void retired() noexcept = 0;
  /// How long an idle engine keeps yielding before it sleeps, for this task's sake.
  virtual std::chrono::nanoseconds idle_spin() const noexcept = 0;
};

class link_engine {
public:
  link_engine() = default;
  /// Retires every task still registered (their owners must not wait for ever) and joins.
  ~link_engine();
  link_engine(const link_engine&) = delete;
  link_engine& operator=(const link_engine&) = delete;

  /// Starts turning `task` (the thread starts with the first task). The task stays valid until
  /// its retired() was called.
  void add(engine_task& task);
  /// One pass over the tasks for a waiting thread, unless another thread is taking one: true if
  /// it took the pass. The engine's thread leaves its turns to such helpers while they come.
  bool help() noexcept;
  /// How often the engine's thread has stood down for a helper so far.
  std::uint64_t stand_downs() const noexcept { return stand_downs_.load(std::memory_order_relaxed); }

private:
  void run();
  /// Turns every task once (the caller holds turn_): true if any moved.
  bool pass() noexcept;
  bool helped_lately() const noexcept;

  std::mutex mutex_;
  std::condition_variable added_cv_;
  std::vector<engine_task*> added_;
  bool quit_ = false;
  std::thread thread_;
  std::atomic<int> tasks_open_{0}; // added and not yet retired

  std::mutex turn_; // one pass at a time: the engine's thread or a helper
  std::vector<engine_task*> tasks_;
  std::chrono::nanoseconds idle_spin_{0};     // the longest of the tasks'
  std::atomic<std::int64_t> helped_at_{0};    // steady_clock ns of a helper's last pass
  std::atomic<std::uint64_t> stand_downs_{0}; // naps of the engine's thread for helpers
};

} // namespace ringpipe::mpi::detail
