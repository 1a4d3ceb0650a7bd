#include "process_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ringpipe::detail {
namespace {
long membarrier(int command) noexcept { return syscall(__NR_membarrier, command, 0U, 0); }

// Registered once per process: the expedited command (IPIs to the CPUs that run this process's
// threads, about 1 us here) needs it; the plain one waits for a grace period (milliseconds).
bool registered() noexcept {
  static const bool ok = [] {
    const long offered = membarrier(MEMBARRIER_CMD_QUERY);
    if (offered < 0 || (offered & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return ok;
}
} // namespace

bool process_wide_fence_offered() noexcept { return registered(); }

bool process_wide_fence() noexcept { return registered() && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0; }

} // namespace ringpipe::detail
