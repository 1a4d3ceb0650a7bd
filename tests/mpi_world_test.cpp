// The world's locks (run under mpirun -n 1; the application's setting is made on first):
// ringpipe's own testing and probing calls run with Open MPI's yield_when_idle off (each call
// that found nothing would give up the core, about 1 us, eight times per round trip of a small
// message between ranks), and the setting is back as it was for the application's calls.
#include "../src/mpi/mpi_call_lock.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

using namespace ringpipe;

namespace {

mpi::world* the_world = nullptr;

TEST(WorldLock, RingpipesOwnCallsRunWithoutOpenMpisYieldAndTheApplicationsKeepIt) {
  const auto set = mpi::detail::mpi_call_lock::yield_switch();
  ASSERT_NE(set, nullptr) << "not Open MPI (no opal_progress_set_yield_when_idle): the switch is Open MPI's";
  // Each set() returns the setting it replaced; every check puts that setting back.
  {
    std::lock_guard application(the_world->lock());
    (void)set(true); // on, as ctest sets it for MPI jobs, whatever this job was started with
  }
  for (int round = 0; round < 3; ++round) {
    {
      mpi::detail::mpi_call_lock ringpipe_call(*the_world);
      EXPECT_FALSE(set(false)) << "ringpipe's call runs with Open MPI's yield on (round " << round << ")";
    }
    std::lock_guard application(the_world->lock());
    EXPECT_TRUE(set(true)) << "the application's calls lost Open MPI's yield after ringpipe's (round " << round << ")";
  }
  // Where it was off to begin with, it stays off.
  {
    std::lock_guard application(the_world->lock());
    set(false);
  }
  { mpi::detail::mpi_call_lock ringpipe_call(*the_world); }
  std::lock_guard application(the_world->lock());
  EXPECT_FALSE(set(true)) << "ringpipe's call turned on a yield the application had off";
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 1, "mpi_world_test", the_world);
}
