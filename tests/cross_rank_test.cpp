// One pipeline declared alike on every rank: each rank runs its own stages, and every connection
// between ranks becomes a port at each end with the same index on both. Two ranks run here in one
// process, joined by threads that move messages from one rank's outlet to the other's inlet (what
// ringpipe::mpi does between processes); exactly-once, in-order delivery is checked message by
// message. Stages on any_rank are shared out by the ranks' weights.
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::checker;
using ringpipe::testing::counting_source;
using ringpipe::testing::expect_error;
using ringpipe::testing::host_step;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;

// source (rank 0) -> map kernel (rank 1) -> step (rank 1) -> check (rank 0): two crossings.
struct declared {
  pipeline p;
  checker check;
  declared(runtime& rt, std::uint32_t n) : p(rt, {.name = "spread"}) {
    check.hops = 2;
    auto src = p.add_source<msg>("source", counting_source(n));
    auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
    auto h = p.add_host<msg, msg>("step", host_step);
    auto sink = p.add_sink<msg>("check", [this](const msg& m) { check(m); });
    p.connect(src.out(), k.in());
    p.connect(k.out(), h.in());
    p.connect(h.out(), sink.in());
    p.on_rank(k, 1);
    p.on_rank("step", 1);
  }
};

// Moves one link's messages from the sending rank's outlet to the receiving rank's inlet, waking
// the stage beside each port as it goes (a remote link does).
void relay(const cross_rank_link& tx, const cross_rank_link& rx) {
  ring<msg> from(tx.ring), to(rx.ring);
  std::array<msg, 256> batch{};
  std::error_code ec;
  for (std::size_t n; (n = from.pop_some(batch, 60s, ec)) != 0;) {
    tx.wake_beside();
    if (to.push_all(std::span<const msg>(batch.data(), n), 60s, ec) != n) return;
    rx.wake_beside();
  }
  to.close();
  rx.wake_beside();
}

TEST_F(PipelineTest, EachRankGetsItsStagesAndOnePortPerCrossing) {
  declared zero(rt(), 10), one(rt(), 10);
  EXPECT_TRUE(zero.p.cross_rank_links().empty()) << "no ranks set: the whole pipeline runs here";
  zero.p.set_ranks(0, 2);
  one.p.set_ranks(1, 2);
  const auto a = zero.p.cross_rank_links(), b = one.p.cross_rank_links();
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[0].index, 0u);
  EXPECT_EQ(a[0].port, "source->map@rank1");
  EXPECT_TRUE(a[0].sending);
  EXPECT_EQ(a[0].peer(), 1);
  EXPECT_EQ(b[0].port, "source@rank0->map");
  EXPECT_FALSE(b[0].sending);
  EXPECT_EQ(b[0].peer(), 0);
  EXPECT_EQ(a[1].index, 1u);
  EXPECT_EQ(a[1].port, "step@rank1->check");
  EXPECT_FALSE(a[1].sending);
  EXPECT_EQ(b[1].port, "step->check@rank0");
  EXPECT_TRUE(b[1].sending);
  EXPECT_EQ(a[1].message_size, sizeof(msg));
  std::vector<std::string> names;
  for (const auto& s : one.p.dry_run().stages)
    names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"map", "step", "source@rank0->map", "step->check@rank0"}));
}

TEST_F(PipelineTest, TwoRanksDeliverEveryMessageOnceInOrder) {
  const std::uint32_t n = 100000;
  declared zero(rt(), n), one(rt(), n);
  zero.p.set_ranks(0, 2);
  one.p.set_ranks(1, 2);
  zero.p.start();
  one.p.start();
  std::vector<std::thread> relays;
  const auto a = zero.p.cross_rank_links(), b = one.p.cross_rank_links();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].index, b[i].index);
    ASSERT_TRUE(a[i].ring && b[i].ring);
    // Every port here has a stage beside it that sleeps when idle (host stages, a kernel).
    ASSERT_TRUE(a[i].wake_beside && b[i].wake_beside) << "link " << i << ": a port without its neighbour's wake";
    const auto& tx = a[i].sending ? a[i] : b[i];
    const auto& rx = a[i].sending ? b[i] : a[i];
    relays.emplace_back(relay, tx, rx);
  }
  one.p.wait(2min);
  zero.p.wait(2min);
  for (auto& t : relays)
    t.join();
  EXPECT_EQ(zero.check.expected, n) << zero.check.first_error;
  EXPECT_EQ(zero.check.errors, 0u) << zero.check.first_error;
  EXPECT_EQ(zero.p.metrics().stages.size(), 4u) << "source, check and two ports on rank 0";
}

TEST_F(PipelineTest, RankPlacementMistakesAreRefusedNamingTheStage) {
  declared d(rt(), 10);
  d.p.on_rank("step", 2);
  d.p.set_ranks(0, 2);
  expect_error([&] { d.p.start(); }, make_error_code(errc::invalid_pipeline),
               {"pipeline 'spread'", "stage 'step' on rank 2", "ranks 0 to 1"}, "a stage on rank 2 of 2 ran");
  declared idle(rt(), 10);
  idle.p.set_ranks(2, 3);
  expect_error([&] { idle.p.cross_rank_links(); }, make_error_code(errc::invalid_pipeline),
               {"pipeline 'spread' (rank 2 of 3)", "no stage is placed on this rank"}, "a rank with no stage ran");
  expect_error([&] { idle.p.on_rank("nowhere", 1); }, make_error_code(errc::invalid_pipeline),
               {"no stage named 'nowhere'"}, "an unknown stage was placed");
  expect_error([&] { idle.p.set_ranks(3, 3); }, make_error_code(errc::invalid_argument), {"rank 3 of 3"},
               "a rank outside the program was accepted");
}

TEST_F(PipelineTest, AFarmMovesToARankWhole) {
  pipeline p(rt(), {.name = "farmed"});
  auto src = p.add_source<msg>("source", counting_source(10));
  auto f = p.add_farm<msg, msg>("work", test_kernel("test_map"), {.devices = {0}});
  auto sink = p.add_sink<msg>("check", [](const msg&) {});
  p.connect(src.out(), f.in());
  p.connect(f.out(), sink.in());
  p.on_rank(f, 1);
  p.set_ranks(1, 2);
  std::vector<std::string> names;
  for (const auto& s : p.dry_run().stages)
    names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"work:deal", "work:merge", "work@0", "source@rank0->work:deal",
                                             "work:merge->check@rank0"}));
}

} // namespace

// source -> k0 -> k1 -> farm -> k3 -> check, every stage on any_rank: kernels in contiguous runs
// along the stream by the ranks' weights, host stages with their neighbours, one crossing per
// boundary.
TEST_F(PipelineTest, StagesOnAnyRankAreSharedOutAlongTheStream) {
  const auto make = [&](std::vector<double> weights, int ranks) {
    auto p = std::make_unique<pipeline>(rt(), pipeline_options{.name = "spread"});
    auto src = p->add_source<msg>("source", counting_source(10));
    auto k0 = p->add_kernel<msg, msg>("k0", test_kernel("test_map"));
    auto k1 = p->add_kernel<msg, msg>("k1", test_kernel("test_map"));
    auto f = p->add_farm<msg, msg>("farm", test_kernel("test_map"), {.devices = {0}});
    auto k3 = p->add_kernel<msg, msg>("k3", test_kernel("test_map"));
    auto sink = p->add_sink<msg>("check", [](const msg&) {});
    p->connect(src.out(), k0.in());
    p->connect(k0.out(), k1.in());
    p->connect(k1.out(), f.in());
    p->connect(f.out(), k3.in());
    p->connect(k3.out(), sink.in());
    EXPECT_FALSE(p->has_any_rank());
    for (const char* s : {"source", "k0", "k1", "farm", "k3", "check"})
      p->on_rank(s, any_rank);
    EXPECT_TRUE(p->has_any_rank());
    p->set_ranks(0, ranks, std::move(weights));
    return p;
  };
  const auto ranks_of = [](const pipeline& p) {
    std::vector<int> r;
    for (const char* s : {"source", "k0", "k1", "farm:deal", "farm@0", "farm:merge", "k3", "check"})
      r.push_back(p.rank_of(s));
    return r;
  };
  const auto even = make({}, 2);
  EXPECT_EQ(ranks_of(*even), (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(even->rank_of("farm"), 1) << "a farm by its name";
  ASSERT_EQ(even->cross_rank_links().size(), 1u) << "one crossing: k1 -> farm";
  EXPECT_EQ(even->cross_rank_links()[0].port, "k1->farm:deal@rank1");
  // Rank 1 has three times the devices: three of the four kernels; a rank with none gets none.
  EXPECT_EQ(ranks_of(*make({1, 3}, 2)), (std::vector<int>{0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(ranks_of(*make({2, 0, 2}, 3)), (std::vector<int>{0, 0, 0, 2, 2, 2, 2, 2}));
  EXPECT_EQ(ranks_of(*make({1, 1, 1, 1}, 4)), (std::vector<int>{0, 0, 1, 2, 2, 2, 3, 3}));
  // Costs: a kernel three times the others' takes rank 0 alone; one five times the others' takes
  // rank 1 alone; over three ranks (k0 | k1, farm | k3 by count), a farm six times the others'
  // takes rank 1 alone (a farm by its name).
  auto heavy = make({}, 2);
  heavy->set_cost("k0", 3);
  EXPECT_EQ(ranks_of(*heavy), (std::vector<int>{0, 0, 1, 1, 1, 1, 1, 1}));
  auto heavy_end = make({}, 2);
  heavy_end->set_cost("k3", 5);
  EXPECT_EQ(ranks_of(*heavy_end), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  auto heavy_farm = make({}, 3);
  EXPECT_EQ(ranks_of(*heavy_farm), (std::vector<int>{0, 0, 1, 1, 1, 1, 2, 2}));
  heavy_farm->set_cost("farm", 6);
  EXPECT_EQ(ranks_of(*heavy_farm), (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2}));
  expect_error([&] { heavy->set_cost("check", 2); }, make_error_code(errc::invalid_argument),
               {"stage 'check' is not a kernel stage"}, "a host stage's cost was taken");
  expect_error([&] { heavy->set_cost("k1", 0); }, make_error_code(errc::invalid_argument),
               {"stage 'k1'", "a cost must be a positive number"}, "a zero cost was taken");
  // A stage placed by hand stays; a mismatched weight list is refused.
  auto fixed = make({}, 2);
  fixed->on_rank("k3", 0);
  EXPECT_EQ(fixed->rank_of("k3"), 0);
  EXPECT_EQ(fixed->rank_of("check"), 0) << "the sink follows the stage it takes from";
  expect_error([&] { fixed->set_ranks(0, 2, {1.0}); }, make_error_code(errc::invalid_argument),
               {"1 rank weights for 2 ranks"}, "one weight for two ranks was accepted");
}
