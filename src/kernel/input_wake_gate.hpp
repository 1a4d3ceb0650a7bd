#pragma once
// Whether new input should wake a kernel's proxy, or whether the launch in flight takes it.

#include <atomic>

namespace ringpipe::detail {

/// Whether new input should wake a kernel's proxy. While a launch that pops its input ring itself
/// runs (or every staging lane is taken), a push gives the proxy nothing to do: a farm's dealer
/// woke a batched replica's proxy on every turn, and each wake restarted its backoff at 40 us, two
/// thirds of its polls on the cores the devices' workers need. Such pushes are remembered instead:
/// the launch's end wakes the proxy if any came (or wakes it anyway), and the proxy looks at the
/// ring after release(). Sequentially consistent: a push that races either sees the hold gone or
/// is seen by whoever ends it.
class input_wake_gate {
public:
  /// The proxy's strand, before enqueueing a launch whose completion will call ended().
  void hold() noexcept { held_.store(true); }
  /// The proxy's strand, before it next reads the input ring: the launch was seen to return.
  void release() noexcept {
    held_.store(false);
    missed_.store(false);
  }
  /// The launch's completion (any thread): whether input came while it ran.
  bool ended() noexcept {
    held_.store(false);
    return missed_.exchange(false);
  }
  /// Input came (any thread): whether to wake the proxy now.
  bool should_wake() noexcept {
    if (!held_.load()) return true;
    missed_.store(true);
    return !held_.load();
  }

private:
  std::atomic<bool> held_{false}, missed_{false};
};

} // namespace ringpipe::detail
