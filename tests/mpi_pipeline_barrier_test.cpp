// A barrier over the stages of one pipeline split over two ranks (run under mpirun -n 2,
// mpi::add_barrier): a ring kernel on each rank and each rank's driver thread move in lock step,
// a kernel on one rank held while the other rank's driver has not arrived; a barrier a rank would
// have no member of is refused on both ranks in start().
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/mpi/rank_barrier.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "mpi_test_main.hpp"
#include "test_message.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {


struct phase_item {
  std::uint32_t seq, phase, tag, pad;
};

class RankPipelineBarrier : public ringpipe::testing::OnRanks {};

// Declared alike on both ranks: side s (0 "left", 1 "right") is a source of `count` items, a
// phased kernel tagging them s, and a sink that checks them, all placed on rank s.
struct two_sided {
  pipeline p;
  std::atomic<std::uint32_t> seen{0}, wrong{0};
  two_sided(runtime& rt, const char* name, std::uint32_t count) : p(rt, {name}) {
    for (std::uint32_t side = 0; side < 2; ++side) {
      const std::string n = side == 0 ? "left" : "right";
      auto src = p.add_source<phase_item>(n + "-in", [count, next = 0u]() mutable -> std::optional<phase_item> {
        if (next == count) return std::nullopt;
        return phase_item{next++, 0, 0, 0};
      });
      kernel_spec spec(test_phases_source(), "test_phased_stage");
      spec.args = {kernel_arg::of(side)};
      auto k = p.add_kernel<phase_item, phase_item>(n, spec);
      auto sink = p.add_sink<phase_item>(n + "-out", [this, side](const phase_item& m) {
        if (m.seq != seen.load() || m.phase != m.seq || m.tag != side) wrong.fetch_add(1);
        seen.fetch_add(1);
      });
      p.connect(src.out(), k.in());
      p.connect(k.out(), sink.in());
      for (const std::string& stage : {n + "-in", n, n + "-out"})
        p.on_rank(stage, static_cast<int>(side));
    }
  }
};

TEST_F(RankPipelineBarrier, KernelsAndDriversOnBothRanksMoveInLockStep) {
  constexpr std::uint32_t phases = 200;
  two_sided t(rt(), "phased-over-ranks", phases);
  std::atomic<std::uint32_t> completions{0};
  barrier_options options;
  options.name = "phases";
  options.timeout = 20s;
  options.on_phase = [&](std::uint32_t) { completions.fetch_add(1); };
  mpi::distributed_pipeline d(w(), t.p);
  auto b = mpi::add_barrier(w(), t.p, {barrier_member::stage("left", 1), barrier_member::stage("right", 1), "driver"},
                            options);
  d.start();
  const auto driver = b->participant("driver");
  ASSERT_EQ(b->stats().participants.size(), 2u) << "this rank's kernel and its driver";
  // Rank 0's driver holds back phase 0 for 400 ms; rank 1's driver arrives at once, and its
  // kernel must still wait for rank 0's driver: 200 ms in, rank 1 has passed no phase.
  std::atomic<std::uint32_t> early{0};
  std::thread look;
  if (w().rank() == 1)
    look = std::thread([&] {
      std::this_thread::sleep_for(200ms);
      early = t.seen.load();
    });
  if (w().rank() == 0) std::this_thread::sleep_for(400ms);
  for (std::uint32_t k = 0; k < phases; ++k)
    b->arrive_and_wait(driver);
  if (look.joinable()) look.join();
  d.wait(60s);
  if (w().rank() == 1) {
    EXPECT_LE(early.load(), 1u) << "rank 1 passed phase 0 before rank 0's driver arrived";
  }
  EXPECT_EQ(t.seen.load(), phases);
  EXPECT_EQ(t.wrong.load(), 0u);
  EXPECT_EQ(completions.load(), phases) << "on rank " << w().rank();
  const auto m = t.p.metrics();
  ASSERT_EQ(m.barriers.size(), 1u);
  EXPECT_EQ(m.barriers[0].phases, phases);
}

TEST_F(RankPipelineBarrier, ABarrierARankHasNoMemberOfIsRefusedOnEveryRank) {
  two_sided t(rt(), "lopsided", 10);
  mpi::distributed_pipeline d(w(), t.p);
  (void)mpi::add_barrier(w(), t.p, {barrier_member::stage("left", 1)}, {.name = "left-only"});
  ringpipe::testing::expect_error(
      [&] { d.start(); }, make_error_code(errc::invalid_pipeline),
      {"barrier 'left-only'", "rank 1 would hold none of its members", "a host member takes part on every rank"},
      "a barrier rank 1 could never arrive at was built");
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 2, "mpi_pipeline_barrier_test");
}
