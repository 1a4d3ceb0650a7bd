// The world's locks (run under mpirun -n 1; the application's setting is made on first):
// ringpipe's own testing and probing calls run with Open MPI's yield_when_idle off (each call
// that found nothing would give up the core, about 1 us, eight times per round trip of a small
// message between ranks), and the setting is back as it was for the application's calls. And the
// transfers a link's end leaves under way keep their memory until MPI is done with them.
#include "../src/mpi/link_io.hpp"
#include "../src/mpi/mpi_call_lock.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using ringpipe::testing::the_world;

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

// A data frame an end left under way (a failed or destroyed link) keeps the memory it is sent
// from until MPI has sent it: here to this rank itself, received only after the end is gone. Freed
// with its end, a ring's slots were read after the free under load (a segfault in Open MPI).
TEST(OrphanTransfers, AFrameLeftUnderWayKeepsItsMemoryUntilMpiHasSentIt) {
  auto& w = *the_world;
  constexpr std::size_t slot = 64, count = 1 << 16; // 4 MiB: a rendezvous, whatever the eager limit
  auto memory = std::make_shared<std::vector<std::byte>>(slot * count);
  for (std::size_t i = 0; i < memory->size(); ++i)
    (*memory)[i] = static_cast<std::byte>(i * 7 + i / 4096);
  const auto expected = *memory;
  const std::weak_ptr<std::vector<std::byte>> watch = memory;
  {
    mpi::detail::link_io io(w, w.rank(), 7, 10s, [] { return false; });
    io.hold_memory(memory);
    io.send_data(memory->data(), count, slot);
  } // destroyed with the frame under way: nobody has received it
  memory.reset();
  EXPECT_FALSE(watch.expired()) << "the memory of a frame MPI had not sent went with its end";
  std::vector<std::byte> got(expected.size());
  {
    std::lock_guard application(w.lock());
    MPI_Status status;
    MPI_Probe(w.rank(), MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    int header = 0;
    MPI_Get_count(&status, MPI_BYTE, &header);
    std::vector<std::byte> h(static_cast<std::size_t>(header));
    MPI_Recv(h.data(), header, MPI_BYTE, w.rank(), status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(got.data(), static_cast<int>(got.size()), MPI_BYTE, w.rank(), status.MPI_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
  EXPECT_TRUE(got == expected) << "the frame's messages arrived changed";
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!watch.expired() && std::chrono::steady_clock::now() < until) {
    mpi::detail::link_io::test_orphans(w);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired()) << "the memory was kept after MPI had sent the frame";
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 1, "mpi_world_test");
}
