#pragma once
// The main() of a test run under mpirun: MPI initialised once for all tests, a check of the
// number of ranks, and every rank's exit code the worst of all ranks' (mpirun reports one); the
// world it made, and a fixture over it.

#include <ringpipe/mpi/world.hpp>
#include <ringpipe/runtime.hpp>

#include <gtest/gtest.h>

#include <mpi.h>

#include <cstdio>

namespace ringpipe::testing {

/// The world run_on_ranks made, for the tests it runs.
inline mpi::world* the_world = nullptr;

/// A test on every rank: the world, whether this rank sends (rank 0), and one runtime per process.
class OnRanks : public ::testing::Test {
protected:
  static mpi::world& w() { return *the_world; }
  static bool sender() { return w().rank() == 0; }
  static runtime& rt() {
    static runtime r;
    return r;
  }
};

inline int run_on_ranks(int argc, char** argv, int ranks, const char* name) {
  mpi::world world(argc, argv);
  the_world = &world;
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
