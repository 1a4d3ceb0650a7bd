#pragma once
// A stage's step on one of the runtime's io threads (the poll executor runs every poller's step
// inside one). A runtime narrowed to one running thread (runtime::narrow_threads) reads these to
// tell a thread held in a step (a user's source or sink that blocks) from one that only works,
// and lets a parked thread run the other stages until that step returns: one thread for a farm's
// host stages must not make one blocking function stop them all.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringpipe {
class runtime;
}

namespace ringpipe::detail {

/// A step held this long lets a parked thread go (and parked threads look this often).
inline constexpr std::chrono::milliseconds io_step_relief_after{10};

/// One io thread's: when its current step began (steady_clock ticks; 0: in none) and whether it
/// is parked (under the runtime's threads mutex).
struct io_thread_state {
  std::atomic<std::int64_t> step_since{0};
  bool parked = false;
};

/// Whether this thread is one of a runtime's io threads.
bool on_io_thread() noexcept;

class io_step {
public:
  /// On a runtime io thread, marks the step's start; elsewhere (a test's own thread) nothing.
  io_step() noexcept;
  ~io_step();
  io_step(const io_step&) = delete;
  io_step& operator=(const io_step&) = delete;

private:
  io_thread_state* state_ = nullptr; // null: not an io thread, or inside another step
  runtime* rt_ = nullptr;
  std::int64_t since_ = 0;
};

} // namespace ringpipe::detail
