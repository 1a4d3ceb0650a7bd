#pragma once
// A host function's own blocking call: a wait on a future, a lock or a condition that another
// stage of the same runtime must satisfy. ringpipe's own blocking calls (a ring's push and pop, a
// barrier's wait, array copies, collectives, run_on_device, a pipeline's stop and wait) already
// let another io thread run the rest while they sleep; a call of the user's own cannot be seen,
// so it says so by running inside a blocking_scope. On a runtime fixed at one io thread the
// other stage would otherwise never run, and the wait would last its whole timeout, or forever.
//
//   auto answer = ringpipe::call_blocking([&] { return reply.get(); }); // in a host function
//
// Modelled on Tokio's block_in_place. Off the runtime's io threads (the application's own
// threads) it costs a flag and does nothing else.

#include <ringpipe/detail/blocked_wait.hpp>

#include <utility>

namespace ringpipe {

/// While it lives, the io thread it was made on counts as blocked: the runtime runs one more
/// thread (a parked one let go, or one started) so that the work the thread waits for does not
/// wait for it. Scopes and ringpipe's own blocking waits nest; the outermost holds the thread.
class blocking_scope {
public:
  blocking_scope() noexcept { wait_.sleeping(); }
  blocking_scope(const blocking_scope&) = delete;
  blocking_scope& operator=(const blocking_scope&) = delete;

private:
  detail::blocked_wait wait_;
};

/// Calls `fn()` in a blocking_scope and returns what it returns (or lets its exception through).
template <class Fn> decltype(auto) call_blocking(Fn&& fn) {
  const blocking_scope scope;
  return std::forward<Fn>(fn)();
}

} // namespace ringpipe
