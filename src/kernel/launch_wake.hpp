#pragma once
// Wakes a kernel's proxy when a launch completes, from the OpenCL runtime's thread, instead of
// waiting for the proxy's next poll. The driver cuts the relay off when it releases, since a
// callback may still run after that.

#include "driver.hpp"

#include <memory>
#include <mutex>

namespace ringpipe::detail {

struct wake_relay {
  std::mutex mutex;
  kernel_lifecycle* life = nullptr;

  explicit wake_relay(kernel_lifecycle& l) : life(&l) {}
  void cut() {
    std::lock_guard lock(mutex);
    life = nullptr;
  }
};

// Calls `Tell` on the relay's proxy, unless the driver cut it off; frees the callback's copy.
template <void (kernel_lifecycle::*Tell)()> void CL_CALLBACK tell_on_complete(cl_event, cl_int, void* user) {
  auto* relay = static_cast<std::shared_ptr<wake_relay>*>(user);
  {
    std::lock_guard lock((*relay)->mutex);
    if ((*relay)->life != nullptr) ((*relay)->life->*Tell)();
  }
  delete relay;
}

template <void (kernel_lifecycle::*Tell)()>
void on_complete(const cl::Event& done, const std::shared_ptr<wake_relay>& relay) {
  auto* user = new std::shared_ptr<wake_relay>(relay);
  if (const cl_int e = clSetEventCallback(done(), CL_COMPLETE, tell_on_complete<Tell>, user); e != CL_SUCCESS) {
    delete user;
    throw cl::Error(e);
  }
}

/// Wakes `relay`'s proxy once `done` completes; throws cl::Error if the callback cannot be set.
inline void wake_on_complete(const cl::Event& done, const std::shared_ptr<wake_relay>& relay) {
  on_complete<&kernel_lifecycle::launch_completed>(done, relay);
}

/// Tells `relay`'s proxy once `done` completes (kernel_lifecycle::launch_ended, which wakes it only
/// where input came meanwhile); throws cl::Error if the callback cannot be set.
inline void end_on_complete(const cl::Event& done, const std::shared_ptr<wake_relay>& relay) {
  on_complete<&kernel_lifecycle::launch_ended>(done, relay);
}

} // namespace ringpipe::detail
