#include "mode_choice.hpp"

namespace ringpipe::detail {

mode_choice choose_mode(const mode_facts& f) noexcept {
  mode_choice c;
  // A gated kernel runs batched through device mirrors, also on a device that shares memory.
  const bool shared = f.rings_in_device_svm && f.device_shares_memory && !f.gated;
  c.transport = shared ? kernel_transport::shared_memory : kernel_transport::mirrored;
  if (f.forced) {
    c.mode = *f.forced;
    const bool device_can = c.mode == kernel_mode::batched ||
                            (c.mode == kernel_mode::persistent ? f.supports_persistent : f.supports_parked);
    if (!device_can)
      c.refusal = mode_refusal::device_cannot;
    else if (c.mode != kernel_mode::batched && !shared)
      c.refusal = mode_refusal::rings_not_shared;
    return c;
  }
  if (shared && f.supports_persistent && f.persistent_available)
    c.mode = kernel_mode::persistent;
  else if (shared && f.supports_parked)
    c.mode = kernel_mode::parked;
  else
    c.mode = kernel_mode::batched;
  return c;
}

} // namespace ringpipe::detail
