// A host function that waits for the other ranks (run under mpirun -n 2): on a runtime of one io
// thread (a rank bound to one core gets one), a rank barrier met from a host function waits in
// its exchange with the other ranks, and the other rank arrives only once this rank's other stage
// has told it to. The exchange's wait lets that stage run on a stand-in thread; without, it ran
// only after the barrier had timed out.
#include <ringpipe/mpi/rank_barrier.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using ringpipe::testing::the_world;
constexpr int go_tag = 77;

struct item {
  std::uint32_t seq;
};

// Rank 1's part: waits (up to `patience`) for rank 0's go, then meets the barrier.
bool wait_for_go(mpi::world& w, std::chrono::seconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      int flag = 0;
      std::lock_guard lock(w.lock());
      MPI_Iprobe(0, go_tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      if (flag != 0) {
        int go = 0;
        MPI_Recv(&go, 1, MPI_INT, 0, go_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return true;
      }
    }
    std::this_thread::sleep_for(100us); // the ranks share two cores: leave them to rank 0
  }
  return false;
}

TEST(RankHostWaits, ARankBarrierMetFromAHostFunctionLetsTheRanksOtherStagesRun) {
  mpi::world& w = *the_world;
  barrier_options options;
  options.name = "meet";
  options.timeout = 5s;
  mpi::rank_barrier meet(w, {"fn"}, options);
  if (w.rank() == 1) {
    const bool told = wait_for_go(w, 30s);
    ASSERT_TRUE(told) << "rank 0's other stage never ran";
    meet.arrive_and_wait(meet.participant("fn"));
    return;
  }
  runtime rt(topology::from_devices({}), runtime_options{.threads = 1});
  std::atomic<bool> waiting{false};
  std::string failure;
  auto told_at = std::chrono::steady_clock::time_point{};
  const auto since = std::chrono::steady_clock::now();
  pipeline p(rt, {"rank 0"});
  // Tells rank 1 to come, once the host function below waits at the barrier.
  auto tell = p.add_source_batch<item>("tell", [&](std::span<item>) -> std::optional<std::size_t> {
    if (!waiting.load()) return 0;
    const int go = 1;
    std::lock_guard lock(w.lock());
    MPI_Send(&go, 1, MPI_INT, 1, go_tag, MPI_COMM_WORLD);
    told_at = std::chrono::steady_clock::now();
    return std::nullopt;
  });
  auto drop = p.add_sink<item>("drop", [](const item&) {});
  p.connect(tell.out(), drop.in());
  auto one = p.add_source<item>("one", [sent = false]() mutable -> std::optional<item> {
    if (sent) return std::nullopt;
    sent = true;
    return item{0};
  });
  auto at_barrier = p.add_sink<item>("at barrier", [&](const item&) {
    waiting = true;
    try {
      meet.arrive_and_wait(meet.participant("fn"));
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  p.connect(one.out(), at_barrier.in());
  p.run(60s);
  EXPECT_EQ(failure, "") << "the barrier failed while rank 0's other stage waited for its thread";
  EXPECT_LT(told_at - since, 4s) << "rank 1 was told only after the barrier's timeout";
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 2, "mpi_host_waits_test");
}
