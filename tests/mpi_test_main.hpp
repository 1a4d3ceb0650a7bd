#pragma once
// The main() of a test run under mpirun: MPI initialised once for all tests, a check of the
// number of ranks, and every rank's exit code the worst of all ranks' (mpirun reports one).

#include <ringpipe/mpi/world.hpp>

#include <gtest/gtest.h>

#include <mpi.h>

#include <cstdio>

namespace ringpipe::testing {

inline int run_on_ranks(int argc, char** argv, int ranks, const char* name, mpi::world*& world_out) {
  mpi::world world(argc, argv);
  world_out = &world;
  if (world.size() != ranks) {
    std::fprintf(stderr, "%s runs on %d ranks (mpirun -n %d), not %d\n", name, ranks, ranks, world.size());
    return 1;
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  {
    std::lock_guard lock(world.lock());
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  return any;
}

} // namespace ringpipe::testing
