#pragma once
// A blocking call on a thread that may be the one to run what it waits for: a host function on a
// runtime's io thread that pops from a ring another host stage of that runtime fills, or waits at
// a barrier another host stage must reach. A runtime sets this thread's hook on each of its io
// threads (another thread runs the rest meanwhile: runtime::stand_in_thread); the blocking waits
// of rings, barriers, array copies and collectives hold a blocked_wait and say when they start to
// sleep, and a user's blocking_scope (ringpipe/blocking.hpp) at once. Waits nest: the hook is
// told of each, and holds one stand-in for the outermost. On any other thread the hook is empty
// and a blocked_wait costs a flag.

namespace ringpipe::detail {

/// What this thread does when a blocking wait starts to sleep, and when that wait ends.
struct blocking_hook {
  void* context = nullptr;
  void (*begin)(void* context) noexcept = nullptr;
  void (*end)(void* context) noexcept = nullptr;
};

/// This thread's hook (set by the runtime on its io threads; empty elsewhere).
inline blocking_hook& this_thread_blocking_hook() noexcept {
  thread_local blocking_hook hook;
  return hook;
}

/// Held by a blocking call for its wait: sleeping() tells this thread's hook once, the end of the
/// wait tells it again.
class blocked_wait {
public:
  blocked_wait() = default;
  blocked_wait(const blocked_wait&) = delete;
  blocked_wait& operator=(const blocked_wait&) = delete;
  ~blocked_wait() {
    if (told_.end != nullptr) told_.end(told_.context);
  }
  /// The wait is about to sleep (it spun and yielded first: a short wait tells nobody).
  void sleeping() noexcept {
    if (asleep_) return;
    asleep_ = true;
    told_ = this_thread_blocking_hook();
    if (told_.begin != nullptr) told_.begin(told_.context);
  }

private:
  bool asleep_ = false;
  blocking_hook told_{};
};

} // namespace ringpipe::detail
