#pragma once
// How a parallel_for run learns that its commands ended: an OpenCL event callback per command
// records (chunk, status, time) and wakes the calling thread, and holds the run's memory open
// until the command ended.

#include "../core/transfer_service.hpp"
#include "parallel_memory.hpp"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace ringpipe::detail {

struct ended_event {
  std::size_t chunk;
  cl_int status;
  std::chrono::steady_clock::time_point at;
};

struct run_signals {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<ended_event> ended;
};

/// Reports `e`'s end as chunk `chunk`'s to `signals` (null: to nobody); `memory` lives until then,
/// and `commands` counts the command in flight (refused once the runtime is shutting down).
void watch_chunk_event(cl::Event& e, std::size_t chunk, const std::shared_ptr<run_signals>& signals,
                       const std::shared_ptr<chunk_memory>& memory, const std::shared_ptr<transfer_service>& commands);

} // namespace ringpipe::detail
