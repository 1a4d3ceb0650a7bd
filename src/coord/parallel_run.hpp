#pragma once
// Between parallel_kernel (built programs, validation, reports) and its scheduler (one run).

#include "../core/transfer_service.hpp"
#include "chunk_sizing.hpp"
#include "idle_remeasure.hpp"

#include <ringpipe/parallel_for.hpp>

#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ringpipe::detail {

class run_memory;

/// What a parallel_kernel keeps between runs: its devices, their programs, their speeds, and the
/// last run's memory for host arrays.
struct parallel_speeds {
  std::mutex one_run_at_a_time;
  /// The runtime's: every command of a run holds it open, so the runtime, when destroyed, waits
  /// (bounded) for commands a timed-out run left running instead of exiting under them.
  std::shared_ptr<transfer_service> commands;
  std::vector<const device*> lanes;
  std::vector<cl::Program> programs;
  std::vector<cl::CommandQueue> queues;      // per lane, made by the first run
  std::vector<cl::Kernel> kernels;           // per lane; a run sets every argument before its first chunk
  std::map<std::size_t, speed_record> speed; // per device index
  idle_remeasure remeasure;                  // when a pool's idle devices measure again
  /// Whether its CPU devices share the host's cores, and why (parallel_for_report::cpu_cores).
  std::string cpu_cores;
  /// Reused by the next run of the same sizes once no command of its run holds it.
  std::shared_ptr<run_memory> kept_memory;
};

/// The last run's host-array memory (`speeds.kept_memory`), refilled, where it fits and nothing of
/// its run holds it any more (a run that timed out leaves commands that do); else new, kept for
/// the next run.
std::shared_ptr<run_memory> host_array_memory(parallel_speeds& speeds, const std::vector<parallel_arg>& args,
                                              std::size_t n, const std::string& what);
/// A power of two up to 64 on CPUs (256 elsewhere) that the kernel allows on the device: dynamic
/// chunks are multiples of it.
std::size_t chunk_work_group_size(const cl::Kernel& kernel, const device& dev);
/// The median of `v` (0 when empty).
double median(std::deque<double> v);
/// "chunk [a, b): <what the exception says>".
std::string failure_text(const std::exception_ptr& e, index_range r);

/// One run over [0, n) (arguments already checked); throws on timeout or when every device failed.
parallel_for_report run_parallel(parallel_speeds& speeds, const parallel_for_options& options,
                                 const kernel_source& source, std::size_t n, const std::vector<parallel_arg>& args);

} // namespace ringpipe::detail
