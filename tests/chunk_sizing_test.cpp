// The dynamic partition's chunk sizes, without devices: small measuring chunks until every speed
// is known, then guided shares by measured speed (a device ten times slower gets a tenth), pools
// of devices on the same cores counted once, failed devices left out, and the bounds; speeds
// taken over a run's big chunks as well as its last small ones; a pool's idle device measured
// again after runs that double; static ranges launched as rounded chunks and their rest.
#include "../src/coord/chunk_sizing.hpp"
#include "../src/coord/idle_remeasure.hpp"

#include <gtest/gtest.h>

namespace {

using ringpipe::dynamic_partition;
using ringpipe::detail::dynamic_chunk_size;
using ringpipe::detail::idle_remeasure;
using ringpipe::detail::lane_speed;
using ringpipe::detail::speed_record;

const dynamic_partition plain{.min_chunk = 1, .first_chunks = 16, .in_flight = 2, .speed_window = 5};

TEST(ChunkSizing, SmallMeasuringChunksUntilEverySpeedIsKnown) {
  // Lane 0 is known and looks ten times faster; lane 1 is not known yet.
  const std::vector<lane_speed> lanes = {{"a", 10.0, true, true}, {"b", 1.0, false, true}};
  const std::size_t n = 1 << 20;
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, n, n / 2, plain, 2, 1), std::size_t(n * (10.0 / 11.0) / 16));
  EXPECT_EQ(dynamic_chunk_size(lanes, 1, n, n / 2, plain, 2, 1), std::size_t(n * (1.0 / 11.0) / 16));
}

TEST(ChunkSizing, GuidedSharesFollowMeasuredSpeeds) {
  const std::vector<lane_speed> lanes = {{"a", 10.0, true, true}, {"b", 1.0, true, true}};
  const std::size_t n = 1 << 20, remaining = 1 << 19;
  const auto fast = dynamic_chunk_size(lanes, 0, n, remaining, plain, 2, 1);
  const auto slow = dynamic_chunk_size(lanes, 1, n, remaining, plain, 2, 1);
  EXPECT_EQ(fast, std::size_t(remaining * (10.0 / 11.0) / 2));
  EXPECT_EQ(slow, std::size_t(remaining * (1.0 / 11.0) / 2));
  // Less left, smaller chunks: the devices end together.
  EXPECT_LT(dynamic_chunk_size(lanes, 0, n, remaining / 4, plain, 2, 1), fast / 3);
}

TEST(ChunkSizing, APoolCountsItsFastestDeviceOnce) {
  // Two devices on the same cores: the pool runs at the fast one's speed, which takes half of what
  // is left per chunk (two queued); the slow one would get a tenth of that.
  const std::vector<lane_speed> lanes = {{"host", 10.0, true, true}, {"host", 1.0, true, true}};
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1000000, 400000, plain, 2, 1), 200000u);
  EXPECT_EQ(dynamic_chunk_size(lanes, 1, 1000000, 400000, plain, 2, 1), 20000u);
}

TEST(ChunkSizing, FailedDevicesAreLeftOut) {
  std::vector<lane_speed> lanes = {{"a", 1.0, true, true}, {"b", 1.0, true, false}, {"c", 1.0, false, false}};
  // b and c failed (c was never measured): a alone, guided, without waiting for c's speed.
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1000, 1000, plain, 2, 1), 500u);
}

TEST(ChunkSizing, BoundsAndRounding) {
  const std::vector<lane_speed> lanes = {{"a", 1.0, true, true}};
  dynamic_partition d = plain;
  d.min_chunk = 4096;
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1 << 20, 5000, d, 2, 64), 4096u); // at least min_chunk
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1 << 20, 3000, d, 2, 64), 2944u); // whole work-groups left
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1 << 20, 56, d, 2, 64), 56u);     // then the rest alone
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1 << 20, 1000000, d, 2, 64) % 64, 0u);
  d.min_chunk = 1;
  EXPECT_EQ(dynamic_chunk_size(lanes, 0, 1 << 20, 100, d, 2, 64), 64u); // at least one work-group
  const std::vector<lane_speed> stalled = {{"a", 0.0, true, true}};
  EXPECT_EQ(dynamic_chunk_size(stalled, 0, 1000, 1000, plain, 2, 1), 500u); // no speed: still progress
}

TEST(SpeedRecord, SmallChunksAtTheEndDoNotMakeAFastDeviceLookSlow) {
  // A device doing 2.8 M items/s, each chunk paying 1 ms of fixed cost; its chunks halve toward
  // the run's end, as guided chunks do. Another measured on two big chunks at 0.47 M items/s.
  const double rate = 2.8e6, cost = 1e-3;
  speed_record fast, slow;
  for (std::size_t items = 262144; items >= 64; items /= 2)
    fast.add(items, cost + static_cast<double>(items) / rate, 5);
  slow.add(131072, cost + 131072 / 0.47e6, 5);
  slow.add(131072, cost + 131072 / 0.47e6, 5);
  EXPECT_GT(fast.items_per_second(), 2 * slow.items_per_second());
  // Kept: the last five, and the older chunks bigger than all the newer ones together.
  EXPECT_GT(fast.chunks(), 5u);
  EXPECT_LE(fast.chunks(), 40u);
}

TEST(SpeedRecord, ARunsLastChunksDoNotDropItsBigOnes) {
  // One run's chunks on one device as parallel_for handed them out (rusticl, 4 Mi items over three
  // devices sharing two cores): measuring chunks, then guided ones halving down to min_chunk, and
  // the rest. The device does 25 M items/s and pays 0.4 ms a launch (llvmpipe compiles at each).
  const double rate = 25e6, launch = 0.4e-3;
  speed_record r;
  for (std::size_t items :
       {262144, 262144, 1648896, 824448, 412224, 206112, 103040, 51520, 25760, 12896, 6432, 4096, 2368})
    r.add(items, launch + static_cast<double>(items) / rate, 5);
  // A speed from the five smallest (what was left when each chunk held about as many items as
  // all the newer together) read about half of it, 11-13 M items/s: near a PoCL device of 10 M, and
  // below it in some runs, which then gave that device every later run of the kernel.
  EXPECT_GT(r.items_per_second(), 0.9 * rate);
  EXPECT_LE(r.chunks(), 40u);
}

TEST(SpeedRecord, AFirstChunkSlowedByACompileCountsOnlyUntilTheSecond) {
  speed_record r;
  r.add(352, 0.250, 5); // compiled at its first launch (PoCL, cold cache)
  EXPECT_DOUBLE_EQ(r.items_per_second(), 352 / 0.250);
  r.add(352, 0.001, 5);
  EXPECT_EQ(r.ended(), 2u);
  EXPECT_EQ(r.chunks(), 1u);
  EXPECT_DOUBLE_EQ(r.items_per_second(), 352 / 0.001);
  r.add(352, 0.002, 5); // later chunks count as before
  EXPECT_DOUBLE_EQ(r.items_per_second(), 704 / 0.003);
}

TEST(SpeedRecord, ItemsOverSecondsOfTheWindow) {
  speed_record r;
  EXPECT_EQ(r.items_per_second(), 0.0);
  r.add(1000, 1.0, 2);
  r.add(1000, 1.0, 2);
  EXPECT_DOUBLE_EQ(r.items_per_second(), 1000.0);
  r.add(1000, 0.25, 2); // the first falls out: the newer two hold twice its items
  EXPECT_EQ(r.chunks(), 2u);
  EXPECT_DOUBLE_EQ(r.items_per_second(), 2000.0 / 1.25);
}

TEST(IdleRemeasure, AnIdleDeviceRecordedSlowerMeasuresAgainAfterWaitsThatDouble) {
  idle_remeasure m;
  const std::size_t dev = 3;
  const double fastest = 10, recorded = 7;
  m.ended(dev, 2, false); // a run that measured it: it ran
  EXPECT_FALSE(m.due(dev, recorded, fastest));
  // Each measuring chunk that leaves it slower doubles the runs it then waits idle: 1, 2, 4, ...
  std::size_t measured = 0;
  std::vector<std::size_t> idle_before;
  std::size_t idle = 0;
  for (int run = 0; run < 400; ++run) {
    if (m.due(dev, recorded, fastest)) {
      idle_before.push_back(idle);
      ++measured;
      idle = 0;
      m.ended(dev, 1, true); // its measuring chunk only
    } else {
      ++idle;
      m.ended(dev, 0, false);
    }
  }
  const std::vector<std::size_t> expected = {1, 2, 4, 8, 16, 32, 64, 64, 64};
  ASSERT_GE(idle_before.size(), expected.size());
  EXPECT_EQ(std::vector<std::size_t>(idle_before.begin(), idle_before.begin() + 9), expected);
  EXPECT_LE(measured, 400u / idle_remeasure::longest_wait + 7);
  // Once it runs (its measuring chunk made it the fastest), the wait starts again at one run.
  m.ended(dev, 5, true);
  EXPECT_FALSE(m.due(dev, recorded, fastest));
  m.ended(dev, 0, false);
  EXPECT_TRUE(m.due(dev, recorded, fastest));
}

TEST(IdleRemeasure, NotTheFastestNorOneFarBehind) {
  idle_remeasure m;
  m.ended(0, 0, false);
  m.ended(1, 0, false);
  EXPECT_FALSE(m.due(0, 10, 10));  // the pool's fastest runs and is measured as it runs
  EXPECT_FALSE(m.due(1, 4.9, 10)); // under half the fastest: not worth a measuring chunk
  EXPECT_TRUE(m.due(1, 5, 10));
  EXPECT_FALSE(m.due(2, 7, 10)); // never ended a run here: measured at its start
}

TEST(IdleRemeasure, AtMostOneDeviceOfAPoolAndNoneAloneInItsPool) {
  idle_remeasure m;
  for (std::size_t d = 0; d < 6; ++d)
    m.ended(d, 0, false);
  // Pool "cpu": devices 0 (fastest), 1 and 2 (both due); device 3 not yet measured; pool "gpu":
  // device 4 alone; device 5 of "cpu" failed.
  const std::vector<lane_speed> lanes = {{"cpu", 10, true, true, 0}, {"cpu", 8, true, true, 1},
                                         {"cpu", 9, true, true, 2},  {"cpu", 1, false, true, 3},
                                         {"gpu", 3, true, true, 4},  {"cpu", 20, true, false, 5}};
  EXPECT_EQ(m.choose(lanes), std::vector<std::size_t>{1});
  m.ended(1, 1, true);
  EXPECT_EQ(m.choose(lanes), std::vector<std::size_t>{2}); // device 1 now waits two runs
}

} // namespace

TEST(AlignedChunks, EachRangeBecomesARoundedChunkAndItsRest) {
  using ringpipe::index_range;
  using ringpipe::detail::aligned_chunks;
  const auto chunks = aligned_chunks({{0, 349526}, {349526, 349590}, {700000, 700010}}, 64);
  const std::deque<index_range> expected = {{0, 349504}, {349504, 349526}, {349526, 349590}, {700000, 700010}};
  EXPECT_EQ(chunks, expected);
  EXPECT_TRUE(aligned_chunks({}, 64).empty());
  EXPECT_EQ(aligned_chunks({{5, 9}}, 0), (std::deque<index_range>{{5, 9}}));
}
