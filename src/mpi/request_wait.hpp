#pragma once
// Waiting for a nonblocking MPI call without holding the world's lock between tests (remote
// links' threads need it) and without waiting for ever.

#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <chrono>
#include <thread>

namespace ringpipe::mpi::detail {

/// Tests `r` under the world's lock, pausing between tests (1 us doubling to 500 us), until it
/// completes (true) or `deadline` passes (false: `r` is still under way).
inline bool complete_by(world& w, MPI_Request& r, std::chrono::steady_clock::time_point deadline) {
  for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(500))) {
    int done = 0;
    {
      std::lock_guard lock(w.lock());
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
    if (done != 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

} // namespace ringpipe::mpi::detail
