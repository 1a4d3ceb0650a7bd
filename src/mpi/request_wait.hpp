#pragma once
// Waiting for a nonblocking MPI call without holding the world's lock between tests (remote
// links' threads need it) and without waiting for ever.

#include "mpi_call_lock.hpp"

#include <ringpipe/detail/blocked_wait.hpp>
#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace ringpipe::mpi::detail {

/// Tests `r` under the world's lock, pausing between tests (1 us doubling to 500 us), until it
/// completes (true) or `deadline` passes (false: `r` is still under way). A wait past the first
/// short pauses says it sleeps (detail::blocked_wait): called from a host function on one of a
/// runtime's io threads (a rank barrier's exchange, a collective), that runtime runs its other
/// stages meanwhile, which the other ranks may be waiting for.
inline bool complete_by(world& w, MPI_Request& r, std::chrono::steady_clock::time_point deadline) {
  ringpipe::detail::blocked_wait blocked;
  for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(500))) {
    int done = 0;
    {
      mpi_call_lock lock(w);
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
    if (done != 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (pause >= std::chrono::microseconds(64)) blocked.sleeping();
    std::this_thread::sleep_for(pause);
  }
}

/// A communicator of the caller's own (MPI_Comm_idup of MPI_COMM_WORLD: no rank blocks holding
/// the world's lock), so that the program's collectives on MPI_COMM_WORLD never interleave with
/// the caller's; nullopt when not every rank joined by `deadline` (the handle MPI will write
/// once they do is then left to it).
inline std::optional<MPI_Comm> own_communicator(world& w, std::chrono::steady_clock::time_point deadline) {
  auto* comm = new MPI_Comm(MPI_COMM_NULL); // NOLINT: kept for MPI if the others never join
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(w.lock());
    MPI_Comm_idup(MPI_COMM_WORLD, comm, &r);
  }
  if (!complete_by(w, r, deadline)) return std::nullopt;
  const MPI_Comm mine = *comm;
  delete comm; // NOLINT
  return mine;
}

/// `values`, combined with `op` over every rank, on a communicator of its own: false when not
/// every rank joined by `deadline` (the buffers are then left to MPI, which writes them once the
/// others join; collectives cannot be cancelled).
inline bool all_reduce_by(world& w, std::vector<std::uint64_t>& values, MPI_Op op,
                          std::chrono::steady_clock::time_point deadline) {
  auto comm = own_communicator(w, deadline);
  if (!comm) return false;
  auto in = std::make_unique<std::vector<std::uint64_t>>(values);
  auto out = std::make_unique<std::vector<std::uint64_t>>(values.size());
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(w.lock());
    MPI_Iallreduce(in->data(), out->data(), static_cast<int>(values.size()), MPI_UINT64_T, op, *comm, &r);
  }
  if (!complete_by(w, r, deadline)) {
    (void)in.release();  // NOLINT: left to MPI
    (void)out.release(); // NOLINT
    return false;
  }
  std::lock_guard lock(w.lock());
  MPI_Comm_free(&*comm);
  values = std::move(*out);
  return true;
}

} // namespace ringpipe::mpi::detail
