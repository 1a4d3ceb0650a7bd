// Farms: one kernel replicated on every device of the environment, fed from per-replica queues
// with work stealing. 10^5 items, 10% of them 20x the cost: every item exactly once, in order
// where the farm is ordered; steals counted in the metrics; dealt least loaded (the default),
// every replica's speed is measured and shown; static dealing steals nothing; a kernel that drops
// items fails an ordered farm naming the replica; bad options are refused. (How the dealer splits
// items by speed: farm_dealer_test, on a clock the test moves.)
#include <ringpipe/pipeline.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;
constexpr std::uint32_t items = 100000;

// Item i costs `cheap` mixes, or 20x that for one item in ten.
auto skewed_source(std::uint32_t count, std::uint32_t cheap) {
  return [count, cheap, next = std::uint32_t{0}]() mutable -> std::optional<msg> {
    if (next == count) return std::nullopt;
    auto m = make_test_message<16>(next);
    m.payload[0] = next % 10 == 3 ? 20 * cheap : cheap;
    ++next;
    return m;
  };
}

const stage_metrics& stage(const pipeline_metrics& m, const std::string& name) {
  for (const auto& s : m.stages)
    if (s.name == name) return s;
  throw std::logic_error("no stage " + name);
}

class Farm : public PipelineTest {
protected:
  /// Runs the skewed stream through a farm and checks that every item's result came exactly once.
  pipeline_metrics run_farm(farm_options o, bool& in_order, std::uint32_t cheap = 50) {
    std::vector<int> seen(items);
    pipeline p(rt(), {.name = "farm"});
    auto src = p.add_source<msg>("items", skewed_source(items, cheap));
    auto farm = p.add_farm<msg, msg>("work", test_kernel("test_costly_map"), std::move(o));
    in_order = true;
    auto sink = p.add_sink<msg>("results", [&, expected = std::uint32_t{0}](const msg& m) mutable {
      ASSERT_LT(m.seq, items);
      EXPECT_EQ(m.check, test_check_after(m.seq, 1)) << m.seq;
      ++seen[m.seq];
      if (m.seq != expected) in_order = false;
      ++expected;
    });
    p.connect(src.out(), farm.in());
    p.connect(farm.out(), sink.in());
    p.run(120s);
    const auto not_once = std::find_if(seen.begin(), seen.end(), [](int n) { return n != 1; });
    EXPECT_EQ(not_once, seen.end()) << "item " << (not_once - seen.begin()) << " came "
                                    << (not_once == seen.end() ? 1 : *not_once) << " times";
    return p.metrics();
  }
};

// The farm as it comes: dealt least loaded, with stealing.
TEST_F(Farm, OrderedEveryItemOnceInOrder) {
  bool in_order = false;
  const auto m = run_farm({}, in_order);
  EXPECT_TRUE(in_order);
  const auto& deal = stage(m, "work:deal");
  EXPECT_EQ(deal.msgs_in, items);
  EXPECT_EQ(stage(m, "work:merge").msgs_out, items);
  EXPECT_GE(deal.stolen, deal.steals) << m.table();
}

// Dealt in turn, the costly items (one in ten, at positions 3, 13, 23, ...) land on one replica of
// two, which then has five times the other's work. Stealing needs the dealer ahead of it: with
// items of 50 mixes both replicas were bound by their launches' round trips under load (ASan and
// two busy loops beside), took items as fast as each other and left no queue to steal from (1 run
// in 14). At 1,000 mixes (20,000 for the costly ones, under llvmpipe's 65,535 iterations a loop)
// the work is what binds them: 3 to 4 steals moving about 13,000 items under the same load.
TEST_F(Farm, OrderedEveryItemOnceInOrderWithSteals) {
  bool in_order = false;
  farm_options o;
  o.dealing = farm_dealing::in_turn;
  const auto m = run_farm(o, in_order, 1000);
  EXPECT_TRUE(in_order);
  const auto& deal = stage(m, "work:deal");
  EXPECT_EQ(deal.kind, stage_kind::dealer);
  EXPECT_EQ(deal.msgs_in, items);
  EXPECT_EQ(stage(m, "work:merge").msgs_out, items);
  std::uint64_t replicated = 0;
  for (std::size_t d = 0; d < topo().size(); ++d)
    replicated += stage(m, "work@" + std::to_string(d)).msgs_in;
  EXPECT_EQ(replicated, items);
  if (topo().size() > 1) {
    EXPECT_GT(deal.steals, 0u) << m.table();
    EXPECT_GE(deal.stolen, deal.steals);
  }
  EXPECT_NE(m.table().find("replica queues max/mean 1.00"), std::string::npos) << "all drained\n" << m.table();
}

// max/mean of the replicas' queues, from the rows of a snapshot.
TEST(FarmMetrics, ImbalanceIsTheFullestReplicaQueueOverTheMean) {
  pipeline_metrics m;
  const auto row = [](std::string name, stage_kind kind, std::uint32_t fill) {
    stage_metrics s;
    s.name = std::move(name), s.kind = kind, s.queue_fill = fill;
    return s;
  };
  m.stages = {row("work:deal", stage_kind::dealer, 50), row("work@0", stage_kind::kernel, 30),
              row("work@1", stage_kind::kernel, 10),    row("work@2", stage_kind::kernel, 20),
              row("work:merge", stage_kind::merger, 7), row("workload", stage_kind::kernel, 900)};
  EXPECT_DOUBLE_EQ(m.farm_imbalance("work"), 1.5); // 30 over a mean of 20
  EXPECT_DOUBLE_EQ(m.farm_imbalance("nothing"), 1.0);
  for (auto& s : m.stages)
    s.queue_fill = 0;
  EXPECT_DOUBLE_EQ(m.farm_imbalance("work"), 1.0) << "nothing queued is even";
}

TEST_F(Farm, UnorderedEveryItemOnce) {
  bool in_order = false;
  farm_options o;
  o.ordered = false;
  run_farm(o, in_order);
}

TEST_F(Farm, StaticDealingStealsNothing) {
  bool in_order = false;
  farm_options o;
  o.steal = false;
  o.dealing = farm_dealing::in_turn;
  const auto m = run_farm(o, in_order);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(stage(m, "work:deal").steals, 0u);
  // Dealt in turn: each replica got its share, to within one.
  for (std::size_t d = 0; d < topo().size(); ++d)
    EXPECT_NEAR(static_cast<double>(stage(m, "work@" + std::to_string(d)).msgs_in),
                static_cast<double>(items) / static_cast<double>(topo().size()), 1.0);
}

TEST_F(Farm, DealtLeastLoadedWithoutStealingEveryItemOnceInOrderSpeedsMeasured) {
  bool in_order = false;
  farm_options o;
  o.steal = false;
  const auto m = run_farm(o, in_order);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(stage(m, "work:deal").steals, 0u);
  // Every replica measured, batched kernels that take their whole ring at each launch included.
  for (std::size_t d = 0; d < topo().size(); ++d)
    EXPECT_GT(stage(m, "work@" + std::to_string(d)).intake_per_s, 0) << m.table();
  EXPECT_DOUBLE_EQ(stage(m, "work:deal").drain_imbalance, 1.0) << "all drained\n" << m.table();
  EXPECT_NE(m.table().find("drain time max/mean 1.00; replicas take "), std::string::npos) << m.table();
  EXPECT_NE(m.json().find("\"intake_per_s\": "), std::string::npos);
}

// Each item's cost given (its mix count): dealt by cost, stolen by cost, every item once in order.
TEST_F(Farm, DealtByCostEveryItemOnceInOrder) {
  bool in_order = false;
  farm_options o;
  o.cost = item_cost<msg>([](const msg& m) { return m.payload[0]; });
  const auto m = run_farm(o, in_order);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(stage(m, "work:deal").msgs_out, items);
  EXPECT_GE(stage(m, "work:deal").stolen, stage(m, "work:deal").steals);
}

TEST_F(Farm, StopMidStreamCountsWhatTheFarmHolds) {
  // A slow sink behind an unending stream: when stopped, every item is delivered or counted where
  // it waits, the dealer's queues and the merger's reorder buffer included.
  std::atomic<std::uint32_t> generated{0}, delivered{0};
  pipeline p(rt(), {.name = "stopped", .capacity = 64});
  auto src = p.add_source<msg>("items", ringpipe::testing::counted_source(generated));
  auto farm = p.add_farm<msg, msg>("work", test_kernel("test_map"));
  auto sink = p.add_sink<msg>("slow", [&](const msg&) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    delivered.fetch_add(1);
  });
  p.connect(src.out(), farm.in());
  p.connect(farm.out(), sink.in());
  p.start();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (delivered.load() < 300 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_GE(delivered.load(), 300u) << "the farm made no progress";
  const auto report = p.stop();
  EXPECT_EQ(delivered.load() + report.undelivered + report.lost, generated.load())
      << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
  EXPECT_NE(report.text().find("(held by the stage)"), std::string::npos) << report.text();
  // The dealer's window: twice the queue and the ring (2,048 slots for 16-byte items) a replica.
  EXPECT_LE(report.undelivered, std::size_t{2} * (4096 + 2048) * topo().size() + std::size_t{512} * topo().size() + 64)
      << "the farm held more than its window: " << report.text();
}

// A farm whose replicas' workers on CPU devices fill the host's cores (told here: as many cores as
// devices) runs its host stages on one io thread while it runs (runtime::narrow_threads); told
// one core more, on every thread the runtime has.
TEST_F(Farm, OnCpuDevicesThatFillTheCoresItsHostStagesTakeTurnsOnOneIoThread) {
  const auto cpus = static_cast<unsigned>(
      std::count_if(topo().begin(), topo().end(), [](const device& d) { return d.info().type == device_type::cpu; }));
  if (cpus != topo().size())
    GTEST_SKIP() << "needs every device a CPU device (" << cpus << " of " << topo().size() << ")";
  for (const unsigned extra : {0u, 1u}) {
    runtime_options o;
    o.host_cores = cpus + extra;
    runtime own(topology::discover(), o);
    { auto grow = own.hold_threads(o.host_cores); } // a thread per core, so that narrowing shows
    ASSERT_EQ(own.threads(), o.host_cores);
    constexpr std::uint32_t count = 5000;
    std::uint32_t next = 0, wrong = 0;
    {
      pipeline p(own, {.name = "narrow"});
      auto src = p.add_source<msg>("items", skewed_source(count, 50));
      auto farm = p.add_farm<msg, msg>("work", test_kernel("test_costly_map"));
      auto sink = p.add_sink<msg>(
          "results", [&](const msg& m) { wrong += m.seq != next++ || m.check != test_check_after(m.seq, 1) ? 1 : 0; });
      p.connect(src.out(), farm.in());
      p.connect(farm.out(), sink.in());
      const bool narrowed = extra == 0;
      EXPECT_EQ(p.dry_run().one_io_thread_reason.empty(), !narrowed) << p.dry_run().text();
      p.start();
      EXPECT_EQ(own.threads(), narrowed ? 1u : o.host_cores) << p.plan();
      const std::string one = "runtime threads asked for: one (a farm whose " + std::to_string(cpus) +
                              " kernels on CPU devices fill the host's " + std::to_string(cpus);
      EXPECT_EQ(p.plan().find(one) != std::string::npos, narrowed) << p.plan();
      p.wait(60s);
      EXPECT_EQ(own.threads(), o.host_cores) << "every thread runs again once the farm has ended";
    }
    EXPECT_EQ(next, count);
    EXPECT_EQ(wrong, 0u);
  }
}

// On one io thread, a sink that blocks (here until the replicas have taken every item) would hold
// up the dealer that feeds them; a parked thread runs the other stages while it is held.
TEST_F(Farm, OnOneIoThreadASinkThatBlocksDoesNotStopTheReplicasFeeds) {
  const auto cpus = static_cast<unsigned>(
      std::count_if(topo().begin(), topo().end(), [](const device& d) { return d.info().type == device_type::cpu; }));
  if (cpus != topo().size())
    GTEST_SKIP() << "needs every device a CPU device (" << cpus << " of " << topo().size() << ")";
  runtime_options o;
  o.host_cores = cpus;
  runtime own(topology::discover(), o);
  constexpr std::uint32_t count = 20000;
  pipeline p(own, {.name = "blocking sink"});
  auto src = p.add_source<msg>("items", skewed_source(count, 50));
  auto farm = p.add_farm<msg, msg>("work", test_kernel("test_costly_map"));
  const auto taken = [&p] {
    std::uint64_t n = 0;
    for (const auto& st : p.metrics().stages)
      n += st.kind == stage_kind::kernel ? st.msgs_in : 0;
    return n;
  };
  std::uint64_t taken_before = 0, taken_after = 0;
  std::uint32_t next = 0, wrong = 0;
  auto sink = p.add_sink<msg>("results", [&](const msg& m) {
    wrong += m.seq != next++ || m.check != test_check_after(m.seq, 1) ? 1 : 0;
    if (next != 1) return;
    taken_before = taken();
    for (int i = 0; i < 10000 && taken() < count; ++i)
      std::this_thread::sleep_for(1ms);
    taken_after = taken();
  });
  p.connect(src.out(), farm.in());
  p.connect(farm.out(), sink.in());
  ASSERT_FALSE(p.dry_run().one_io_thread_reason.empty()) << p.dry_run().text();
  p.run(60s);
  EXPECT_LT(taken_before, count) << "the sink blocked after every item was taken: nothing to show";
  EXPECT_EQ(taken_after, count) << "while the sink was held the replicas were not fed";
  EXPECT_EQ(next, count);
  EXPECT_EQ(wrong, 0u);
}

TEST_F(Farm, AnOrderedFarmWhoseKernelDropsItemsFailsNamingTheReplica) {
  pipeline p(rt(), {.name = "dropping"});
  auto src = p.add_source<msg>("items", ringpipe::testing::counting_source(1000));
  auto farm = p.add_farm<msg, msg>("evens", test_kernel("test_filter_even"));
  auto sink = p.add_sink<msg>("results", [](const msg&) {});
  p.connect(src.out(), farm.in());
  p.connect(farm.out(), sink.in());
  expect_error([&] { p.run(60s); }, make_error_code(errc::stage_failed),
               {"farm replica 'evens@", "one result per item"}, "an ordered farm lost items silently");
}

TEST_F(Farm, BadOptionsAreRefusedNamingTheFarm) {
  pipeline p(rt(), {.name = "bad"});
  farm_options o;
  o.devices = {99};
  expect_error([&] { p.add_farm<msg, msg>("work", test_kernel("test_map"), o); },
               make_error_code(errc::invalid_pipeline), {"farm 'work'", "no device 99"}, "device 99 accepted");
  o.devices = {};
  o.ring = 3;
  expect_error([&] { p.add_farm<msg, msg>("work2", test_kernel("test_map"), o); },
               make_error_code(errc::invalid_argument), {"farm 'work2'", "ring"}, "a ring of 3 slots accepted");
  o.ring = 0;
  o.feed_ahead = std::chrono::microseconds(0);
  expect_error([&] { p.add_farm<msg, msg>("work3", test_kernel("test_map"), o); },
               make_error_code(errc::invalid_argument), {"farm 'work3'", "feed_ahead"}, "no time ahead accepted");
}

} // namespace
