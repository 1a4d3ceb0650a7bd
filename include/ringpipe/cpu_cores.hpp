#pragma once
// CPU devices run their work-items on host threads (device_info::worker_threads). Where the CPU
// devices of a run together run more of them than the host has cores, they compete for the same
// cores: work spread over them runs no faster than on the fastest alone. Where each was given
// cores of its own (PoCL limited by POCL_MAX_PTHREAD_COUNT, llvmpipe by LP_NUM_THREADS, sub-devices),
// they add up. parallel_for decides from this which devices run chunks at once.

#include <ringpipe/device.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringpipe {

/// The worker threads of the CPU devices among some devices, against the host's cores.
struct cpu_core_use {
  std::uint32_t worker_threads = 0; ///< summed over their worker pools, each pool once (PoCL's is shared)
  std::size_t pools = 0;            ///< distinct worker pools of CPU devices
  unsigned host_cores = 0;
  /// Two or more pools whose workers outnumber the cores.
  bool shared() const noexcept { return pools > 1 && worker_threads > host_cores; }
  /// "2 worker pools of CPU devices run 4 threads on 2 host cores: they share the cores"; empty
  /// where there is no CPU device.
  std::string describe() const;
};

/// The CPU devices among `devices`, on `host_cores` (runtime::host_cores()).
cpu_core_use cpu_devices_core_use(const std::vector<const device*>& devices, unsigned host_cores);

/// Worker threads of Mesa's llvmpipe (which reports 8 compute units whatever it runs): the
/// LP_NUM_THREADS environment variable where set (0 runs on the calling thread: 1), else one per
/// CPU where there are several, at most 32 (LP_MAX_THREADS of the Mesa this project installs: 22.3
/// starts 32 worker threads for LP_NUM_THREADS=64).
std::uint32_t llvmpipe_worker_threads(const char* lp_num_threads, unsigned cpus) noexcept;

} // namespace ringpipe
