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

inline void CL_CALLBACK wake_on_complete_callback(cl_event, cl_int, void* user) {
  auto* relay = static_cast<std::shared_ptr<wake_relay>*>(user);
  {
    std::lock_guard lock((*relay)->mutex);
    if ((*relay)->life != nullptr) (*relay)->life->wake();
  }
  delete relay;
}

/// Wakes `relay`'s proxy once `done` completes; throws cl::Error if the callback cannot be set.
inline void wake_on_complete(const cl::Event& done, const std::shared_ptr<wake_relay>& relay) {
  auto* user = new std::shared_ptr<wake_relay>(relay);
  if (const cl_int e = clSetEventCallback(done(), CL_COMPLETE, wake_on_complete_callback, user); e != CL_SUCCESS) {
    delete user;
    throw cl::Error(e);
  }
}

} // namespace ringpipe::detail
