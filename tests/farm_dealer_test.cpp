// The farm's dealer alone, on host rings that the test drains by hand at two speeds, on a clock
// it moves by hand: dealt least loaded, the replica that takes items four times as fast gets about
// four fifths of them and the queues would drain together; dealt in turn it gets half (the slow
// replica's queue fills the dealer's room and the fast one waits). The speeds are learnt from how
// fast each ring empties; when one slows, what it holds moves to the other as soon as that is
// learnt.
#include "../src/actor/farm.hpp"
#include "manual_executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <optional>

using namespace ringpipe;
using namespace ringpipe::detail;
using namespace std::chrono_literals;
using ringpipe::testing::manual_executor;

namespace {

constexpr std::uint32_t ring_slots = 16;

struct dealer_rig {
  std::shared_ptr<manual_executor> ex = std::make_shared<manual_executor>();
  std::shared_ptr<ring_buffer> input = std::make_shared<ring_buffer>(1024, 8);
  std::array<std::shared_ptr<ring_buffer>, 2> rings{std::make_shared<ring_buffer>(ring_slots, 8),
                                                    std::make_shared<ring_buffer>(ring_slots, 8)};
  std::shared_ptr<farm_ledger> ledger = std::make_shared<farm_ledger>(2);
  std::shared_ptr<farm_dealer> dealer;
  std::array<std::uint64_t, 2> taken{};
  std::uint64_t next = 0;
  bool feeding = true;

  std::array<double, 2> credit{}, taken_cost{};
  std::vector<int> times_taken; // per item

  /// Item i costs 7 when odd, 1 when even (with `by_cost`; else the dealer counts 1 each).
  static double cost(std::uint64_t i) { return i % 2 == 1 ? 7 : 1; }

  explicit dealer_rig(farm_dealing dealing, bool steal = false, bool by_cost = false, bool group_by_cost = true,
                      bool for_throughput = false) {
    farm_options o;
    o.dealing = dealing, o.steal = steal, o.queue = 64, o.ring = ring_slots, o.group_by_cost = group_by_cost;
    if (by_cost) o.cost = item_cost<std::uint64_t>([](std::uint64_t i) { return cost(i); });
    dealer = std::make_shared<farm_dealer>(ex, "work:deal", 64, ledger, o, std::vector<double>{1.0, 1.0},
                                           std::vector<std::string>{"work@0", "work@1"});
    dealer->add_input(input);
    for (auto& r : rings)
      dealer->add_output(r);
    if (for_throughput) dealer->poll_for_throughput();
    dealer->start();
  }
  ~dealer_rig() { dealer->stop(); }

  /// 100 us: the source fills the input, the dealer takes a turn, replica r takes `per_tick[r]`
  /// items from its ring (the results pass on at once: the dealer's window never closes).
  /// The source fills the input and the dealer takes a turn.
  void deal() {
    while (feeding && input->try_push_bytes(&next))
      ++next;
    dealer->wake();
    ex->run_ready();
  }
  void tick(std::array<int, 2> per_tick) {
    deal();
    std::uint64_t item = 0;
    for (std::size_t r = 0; r < 2; ++r)
      for (int k = 0; k < per_tick[r] && rings[r]->try_pop_bytes(&item); ++k) {
        ++taken[r];
        times_taken.resize(std::max<std::size_t>(times_taken.size(), item + 1));
        ++times_taken[item];
        ledger->passed_on.fetch_add(1);
      }
    ex->advance(100us);
  }
  /// 100 us in which replica r gets through `budget[r]` of cost (what it overdraws, it pays back).
  void tick_cost(std::array<double, 2> budget) {
    deal();
    std::uint64_t item = 0;
    for (std::size_t r = 0; r < 2; ++r)
      for (credit[r] += budget[r]; credit[r] > 0 && rings[r]->try_pop_bytes(&item);) {
        credit[r] -= cost(item), taken_cost[r] += cost(item);
        ledger->passed_on.fetch_add(1);
      }
    ex->advance(100us);
  }
  double fast_share() const { return static_cast<double>(taken[0]) / static_cast<double>(taken[0] + taken[1]); }
};

TEST(FarmDealer, LeastLoadedDealsInProportionToMeasuredSpeed) {
  dealer_rig rig(farm_dealing::least_loaded);
  for (int t = 0; t < 3000; ++t)
    rig.tick({4, 1});
  const auto report = rig.dealer->balance();
  EXPECT_GE(rig.fast_share(), 0.75) << "taken " << rig.taken[0] << " and " << rig.taken[1] << "\n" << report.table();
  ASSERT_GT(report.devices[1].speed, 0);
  EXPECT_NEAR(report.devices[0].speed / report.devices[1].speed, 4.0, 0.4) << report.table();
  EXPECT_NEAR(report.devices[0].speed, 40000, 4000) << "items per second\n" << report.table();
  EXPECT_LE(report.imbalance, 1.2) << "queues in proportion to speed drain together\n" << report.table();
}

TEST(FarmDealer, InTurnDealsHalfToEachWhateverTheirSpeed) {
  dealer_rig rig(farm_dealing::in_turn);
  for (int t = 0; t < 3000; ++t)
    rig.tick({4, 1});
  const auto report = rig.dealer->balance();
  EXPECT_NEAR(rig.fast_share(), 0.5, 0.02) << report.table();
  EXPECT_GE(report.imbalance, 1.5) << "the slow replica holds the queued items\n" << report.table();
}

// Dealt least loaded, the fast replica's queue is the longer by design: the slow one, run dry,
// must not take half of it (the rule before: half the fullest queue), only what evens the two
// drain times at the speeds measured: a fifth here, where they take 4:1.
TEST(FarmDealer, ADrySlowReplicaStealsOnlyWhatEvensTheDrainTimes) {
  dealer_rig rig(farm_dealing::least_loaded, true);
  for (int t = 0; t < 1000; ++t)
    rig.tick({4, 1});
  rig.feeding = false;
  for (int t = 0; t < 1000 && rig.input->size() > 0; ++t)
    rig.tick({4, 1});
  ASSERT_EQ(rig.input->size(), 0u);
  // Everything is dealt. The slow replica has a fast moment (too short for a new speed sample)
  // and runs dry.
  std::size_t victim_queue = 0;
  for (int t = 0; t < 20 && rig.dealer->steals.load() == 0; ++t) {
    victim_queue = rig.dealer->balance().devices[0].items;
    rig.tick({4, 16});
  }
  ASSERT_EQ(rig.dealer->steals.load(), 1u) << "the slow replica ran dry and took nothing\n"
                                           << rig.dealer->balance().table();
  ASSERT_GT(victim_queue, 20u);
  const auto stolen = static_cast<double>(rig.dealer->stolen.load());
  EXPECT_GE(stolen, 0.1 * static_cast<double>(victim_queue));
  EXPECT_LE(stolen, 0.3 * static_cast<double>(victim_queue)) << "took " << stolen << " of " << victim_queue << "\n"
                                                             << rig.dealer->balance().table();
  for (int t = 0; t < 400; ++t)
    rig.tick({4, 1});
  EXPECT_EQ(rig.taken[0] + rig.taken[1], rig.next) << "every item taken once";
}

// Given each item's cost, the dealer measures speeds in cost per second and splits the work, not
// the item count, by them: replicas getting through 8 and 2 cost units a tick take 0.8 and 0.2 of
// the cost, whatever the items' mix.
TEST(FarmDealer, DealtByCostTheWorkIsSplitBySpeedInCost) {
  dealer_rig rig(farm_dealing::least_loaded, false, true);
  for (int t = 0; t < 3000; ++t)
    rig.tick_cost({8, 2});
  const auto report = rig.dealer->balance();
  const double total = rig.taken_cost[0] + rig.taken_cost[1];
  EXPECT_NEAR(rig.taken_cost[0] / total, 0.8, 0.03) << report.table();
  EXPECT_NEAR(report.devices[0].speed, 80000, 8000) << "cost per second\n" << report.table();
  EXPECT_NEAR(report.devices[1].speed, 20000, 2000) << "cost per second\n" << report.table();
  EXPECT_LE(report.imbalance, 1.2) << report.table();
}

// Given costs, a replica's ring is fed cheapest first (like items side by side in a warp's or a
// vector's lanes) and the ledger, which the merger restores the order by, records that order.
TEST(FarmDealer, GivenCostsEachFeedGoesInOrderOfCostAndTheLedgerFollows) {
  for (const bool group : {true, false}) {
    dealer_rig rig(farm_dealing::least_loaded, false, true, group);
    rig.deal();
    int mixed = 0;
    for (std::size_t r = 0; r < 2; ++r) {
      std::vector<double> costs;
      std::deque<std::uint64_t> given;
      rig.ledger->take_all(r, given);
      std::uint64_t item = 0;
      while (rig.rings[r]->try_pop_bytes(&item)) {
        ASSERT_FALSE(given.empty()) << "replica " << r << ": an item in its ring is not in the ledger";
        EXPECT_EQ(given.front(), item) << "replica " << r << ": the ledger's order is not the ring's";
        given.pop_front();
        costs.push_back(dealer_rig::cost(item));
      }
      EXPECT_TRUE(given.empty()) << "replica " << r << ": the ledger has items its ring never got";
      ASSERT_GE(costs.size(), ring_slots / 2) << "replica " << r << "'s ring was not fed";
      const auto costly = std::count(costs.begin(), costs.end(), 7.0);
      if (costly == 0 || static_cast<std::size_t>(costly) == costs.size()) continue; // one cost only
      ++mixed;
      EXPECT_EQ(std::is_sorted(costs.begin(), costs.end()), group) << "replica " << r << ", grouped " << group;
    }
    EXPECT_GE(mixed, 1) << "no feed mixed costs: nothing to order";
  }
}

TEST(FarmDealer, ACostThatIsNotPositiveFailsTheDealerNamingTheFarmAndItem) {
  dealer_rig rig(farm_dealing::least_loaded);
  farm_options o;
  o.cost = item_cost<std::uint64_t>([](std::uint64_t i) { return i == 5 ? -1.0 : 1.0; });
  auto ledger = std::make_shared<farm_ledger>(2);
  auto dealer = std::make_shared<farm_dealer>(rig.ex, "work:deal", 64, ledger, o, std::vector<double>{1.0, 1.0},
                                              std::vector<std::string>{"work@0", "work@1"});
  auto input = std::make_shared<ring_buffer>(16, 8);
  dealer->add_input(input);
  for (auto& r : rig.rings)
    dealer->add_output(r);
  std::string failure;
  dealer->on_failure = [&](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      failure = x.what();
    }
  };
  dealer->start();
  for (std::uint64_t i = 0; i < 8; ++i)
    ASSERT_TRUE(input->try_push_bytes(&i));
  dealer->wake();
  rig.ex->run_ready();
  EXPECT_TRUE(dealer->failed.load());
  EXPECT_NE(failure.find("farm 'work': item 5 costs -1"), std::string::npos) << failure;
}

// Items are dealt at the speeds known then. When a replica slows, its queue (dealt for the old
// speed) would drain last; once its new speed is learnt the dealer moves the excess at once, not
// when another replica runs dry (only a steal did that before).
TEST(FarmDealer, WhenAReplicaSlowsItsExcessMovesAsSoonAsTheSpeedIsLearnt) {
  dealer_rig rig(farm_dealing::least_loaded, true);
  for (int t = 0; t < 1000; ++t)
    rig.tick({4, 4});
  ASSERT_EQ(rig.dealer->rebalances.load(), 0u) << "equal speeds, even queues\n" << rig.dealer->balance().table();
  balance_report seen;
  for (int t = 0; t < 2000; ++t) {
    rig.tick({4, 1});
    seen = rig.dealer->balance();
    if (seen.devices[1].speed < 0.5 * seen.devices[0].speed) break;
  }
  ASSERT_LT(seen.devices[1].speed, 0.5 * seen.devices[0].speed) << "the slowdown was never learnt\n" << seen.table();
  EXPECT_GE(rig.dealer->rebalances.load(), 1u) << seen.table();
  EXPECT_GT(rig.dealer->rebalanced.load(), 0u);
  EXPECT_LE(seen.imbalance, 1.2) << "the slow replica kept what was dealt for its old speed\n" << seen.table();
  rig.feeding = false;
  for (int t = 0; t < 2000 && rig.taken[0] + rig.taken[1] < rig.next; ++t)
    rig.tick({4, 1});
  ASSERT_EQ(rig.times_taken.size(), rig.next);
  EXPECT_EQ(std::count(rig.times_taken.begin(), rig.times_taken.end(), 1), static_cast<std::ptrdiff_t>(rig.next))
      << "every item taken once";
}

// Under throughput a host stage sleeps until about a quarter of its smallest ring (4 of 16 slots
// here) has come at its rate; a neighbour's wake leaves that sleep alone, but the end of its input
// does not wait for it.
TEST(FarmDealer, UnderThroughputWakesWaitForThePacedTurnButAClosedInputDoesNot) {
  dealer_rig rig(farm_dealing::in_turn, false, false, true, true);
  rig.feeding = false;
  rig.ex->run_ready(); // the first step: nothing yet
  ASSERT_TRUE(rig.ex->timer_in());
  rig.ex->advance(40us); // within its first sleep (50 us)
  const std::uint64_t first = 0, second = 1;
  ASSERT_TRUE(rig.input->try_push_bytes(&first));
  rig.dealer->wake();
  rig.ex->run_ready(); // deals and feeds it: 2 messages moved in the 40 us since it slept
  // A turn that moved less than its batch took all there was: no poll at once to find nothing,
  // the paced sleep now (4 take 80 us at that rate).
  ASSERT_EQ(rig.ex->ready(), 0u) << "polled again at once after a caught-up turn";
  EXPECT_EQ(rig.ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(80us));
  ASSERT_TRUE(rig.input->try_push_bytes(&second));
  rig.dealer->wake();
  EXPECT_EQ(rig.ex->ready(), 0u) << "a neighbour's wake cut the paced sleep short";
  rig.input->close();
  rig.dealer->wake();
  EXPECT_EQ(rig.ex->ready(), 1u) << "the end of the input waited for the paced turn";
}

// A kernel that publishes (a batch done) tells the host stage beside it: a paced sleep stands while
// the ring between has slack, and ends where the kernel took its input ring down to a quarter (it
// would run dry before the paced turn) or filled its output ring to three quarters.
TEST(FarmDealer, APacedSleepEndsWhereAKernelLeftItsRingTight) {
  // One item dealt 40 us after the dealer's first sleep began: 4 take 80 us at that rate.
  const auto paced = [](dealer_rig& rig) {
    rig.feeding = false;
    rig.ex->run_ready();
    rig.ex->advance(40us);
    const std::uint64_t first = 0;
    ASSERT_TRUE(rig.input->try_push_bytes(&first));
    rig.dealer->wake();
    rig.ex->run_ready(); // deals it to replica 0, and sleeps its paced sleep
    ASSERT_EQ(rig.ex->timer_in(), std::optional<std::chrono::steady_clock::duration>(80us));
  };
  std::uint64_t item = 100;
  {
    dealer_rig rig(farm_dealing::in_turn, false, false, true, true);
    for (int k = 0; k < 8; ++k) // fed before: replica 0's ring holds 8 of 16, and 9 once paced
      ASSERT_TRUE(rig.rings[0]->try_push_bytes(&item));
    paced(rig);
    const auto take = [&](int n) {
      for (int k = 0; k < n; ++k)
        ASSERT_TRUE(rig.rings[0]->try_pop_bytes(&item));
    };
    take(3); // 6 left
    rig.dealer->kernel_published(*rig.rings[0], true);
    EXPECT_EQ(rig.ex->ready(), 0u) << "a ring with 6 of 16 left cut the paced sleep short";
    take(2); // 4 left: a quarter
    rig.dealer->kernel_published(*rig.rings[0], true);
    EXPECT_EQ(rig.ex->ready(), 1u) << "a ring down to a quarter waited for the paced turn";
  }
  {
    // Its input (1,024 slots) filled, as a kernel producing into it would.
    dealer_rig rig(farm_dealing::in_turn, false, false, true, true);
    paced(rig);
    for (std::uint64_t k = 0; k < 700; ++k)
      ASSERT_TRUE(rig.input->try_push_bytes(&k));
    rig.dealer->kernel_published(*rig.input, false);
    EXPECT_EQ(rig.ex->ready(), 0u) << "an input with 324 of 1,024 slots free cut the paced sleep short";
    for (std::uint64_t k = 0; k < 100; ++k)
      ASSERT_TRUE(rig.input->try_push_bytes(&k));
    rig.dealer->kernel_published(*rig.input, false);
    EXPECT_EQ(rig.ex->ready(), 1u) << "an input with 224 of 1,024 slots free waited for the paced turn";
  }
}

// A replica's ring is fed only as far as the replica takes in farm_options::feed_ahead at its
// measured speed (down to a power of two), at least 256 items (all it gets before its speed is
// known): one that takes cheap items fast gets them in big feeds (its launches take more at a
// time), a slow one a few hundred, and the rest waits in its queue, where a replica that runs dry
// can still steal it.
TEST(FarmDealer, ARingIsFedWhatItsReplicaTakesInTheFeedAheadTime) {
  auto ex = std::make_shared<manual_executor>();
  auto input = std::make_shared<ring_buffer>(16384, 8);
  const std::array rings{std::make_shared<ring_buffer>(2048, 8), std::make_shared<ring_buffer>(2048, 8)};
  auto ledger = std::make_shared<farm_ledger>(2);
  farm_options o;
  o.queue = 4096, o.ring = 2048, o.feed_ahead = 1500us;
  auto dealer = std::make_shared<farm_dealer>(ex, "work:deal", 8192, ledger, o, std::vector<double>{1.0, 1.0},
                                              std::vector<std::string>{"work@0", "work@1"});
  dealer->add_input(input);
  for (const auto& r : rings)
    dealer->add_output(r);
  dealer->start();
  EXPECT_EQ(dealer->fill_limit(*rings[0]), 256u) << "before any speed is known";
  std::uint64_t next = 0;
  std::array<std::uint32_t, 2> fullest{};
  for (int t = 0; t < 2000; ++t) { // 100 us a tick: 1 M items a second and 20,000
    while (input->try_push_bytes(&next))
      ++next;
    dealer->wake();
    ex->run_ready();
    std::uint64_t item = 0;
    for (std::size_t r = 0; r < 2; ++r) {
      fullest[r] = std::max(fullest[r], rings[r]->size());
      for (int k = 0; k < (r == 0 ? 100 : 2) && rings[r]->try_pop_bytes(&item); ++k)
        ledger->passed_on.fetch_add(1);
    }
    ex->advance(100us);
  }
  const auto report = dealer->balance();
  EXPECT_EQ(dealer->fill_limit(*rings[0]), 1024u) << "1,500 items in 1.5 ms at 1 M a second\n" << report.table();
  EXPECT_EQ(fullest[0], 1024u);
  EXPECT_EQ(dealer->fill_limit(*rings[1]), 256u) << "30 items in 1.5 ms: the least feed\n" << report.table();
  EXPECT_EQ(fullest[1], 256u);
  EXPECT_GT(report.devices[1].items, 0u) << "what the slow replica's ring does not hold waits, stealable";
  dealer->stop();
}

TEST(FarmDealer, EqualReplicasShareEvenly) {
  dealer_rig rig(farm_dealing::least_loaded);
  for (int t = 0; t < 2000; ++t)
    rig.tick({2, 2});
  EXPECT_NEAR(rig.fast_share(), 0.5, 0.02);
  const auto report = rig.dealer->balance();
  EXPECT_NEAR(report.devices[0].speed, report.devices[1].speed, 0.05 * report.devices[1].speed) << report.table();
}

} // namespace
