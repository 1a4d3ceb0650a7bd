// The load balancer: least drain time selection, speeds learnt from completions (robust to one
// slow outlier), a rebalance plan that evens a synthetic load within three rounds, load never
// negative, and concurrent selection and reports (run under ThreadSanitizer too).
#include <ringpipe/balance.hpp>
#include <ringpipe/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

TEST(Balance, SelectsTheDeviceThatDrainsFirst) {
  ringpipe::load_balancer lb({1.0, 3.0});
  std::vector<int> picked(2);
  for (int i = 0; i < 400; ++i)
    ++picked[lb.select_device(1.0)];
  // Capability 1 : 3 before anything is measured.
  EXPECT_EQ(picked[0], 100);
  EXPECT_EQ(picked[1], 300);
  EXPECT_NEAR(lb.imbalance(), 1.0, 0.01);
}

TEST(Balance, LearnsSpeedsFromCompletionsAndIgnoresAnOutlier) {
  ringpipe::load_balancer lb({1.0, 1.0});
  // Device 0 does 100 cost/s, device 1 does 400 cost/s, with one 100x slow completion on 1.
  for (int i = 0; i < 5; ++i) {
    lb.assign(0, 1.0);
    lb.report_completion(0, 10ms, 1.0);
    lb.assign(1, 1.0);
    lb.report_completion(1, i == 2 ? 250ms : 2500us, 1.0);
  }
  EXPECT_NEAR(lb.speed(0), 100.0, 1e-6);
  EXPECT_NEAR(lb.speed(1), 400.0, 1e-6);
  std::vector<int> picked(2);
  for (int i = 0; i < 500; ++i)
    ++picked[lb.select_device(1.0)];
  EXPECT_EQ(picked[0], 100);
  EXPECT_EQ(picked[1], 400);
}

TEST(Balance, AnUnmeasuredDeviceIsScaledByTheMeasuredOnes) {
  ringpipe::load_balancer lb({2.0, 4.0});
  lb.assign(0, 1.0);
  lb.report_completion(0, 10ms, 1.0); // 100 cost/s for capability 2
  EXPECT_NEAR(lb.speed(1), 200.0, 1e-6);
}

TEST(Balance, RebalancePlanEvensASyntheticLoadWithinThreeRounds) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 1.5);
  ringpipe::load_balancer lb({1.0, 1.0, 1.0});
  const double speeds[] = {1.0, 2.0, 4.0};
  for (std::size_t d = 0; d < 3; ++d) { // learn the speeds
    lb.assign(d, 1.0);
    lb.report_completion(d, std::chrono::nanoseconds(static_cast<long>(1e9 / speeds[d])), 1.0);
  }
  for (int i = 0; i < 3000; ++i) // everything dealt to the slowest device
    lb.assign(0, cost(rng));
  ASSERT_GT(lb.imbalance(), 2.0);
  int rounds = 0;
  while (lb.imbalance() > 1.1 && rounds < 3) {
    ++rounds;
    const auto plan = lb.rebalance_plan();
    ASSERT_FALSE(plan.empty());
    for (const auto& m : plan) {
      EXPECT_NE(m.from, m.to);
      EXPECT_GT(m.items, 0u);
      lb.apply(m);
    }
  }
  EXPECT_LE(lb.imbalance(), 1.1) << "after " << rounds << " rounds\n" << lb.report().table();
  // New work keeps arriving, dealt badly: each round's plan evens it again.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 500; ++i)
      lb.assign(0, cost(rng));
    for (const auto& m : lb.rebalance_plan())
      lb.apply(m);
    EXPECT_LE(lb.imbalance(), 1.1) << "round " << round << "\n" << lb.report().table();
  }
  EXPECT_TRUE(lb.rebalance_plan().empty() || lb.imbalance() > 1.2);
  for (std::size_t d = 0; d < 3; ++d)
    EXPECT_GE(lb.load(d), 0.0);
}

TEST(Balance, NoPlanWhenEven) {
  ringpipe::load_balancer lb({1.0, 1.0});
  lb.assign(0, 10, 10);
  lb.assign(1, 11, 11);
  EXPECT_TRUE(lb.rebalance_plan().empty());
}

TEST(Balance, LoadNeverNegative) {
  ringpipe::load_balancer lb({1.0});
  lb.report_completion(0, 1ms, 5.0); // a completion never selected
  EXPECT_EQ(lb.load(0), 0.0);
  EXPECT_EQ(lb.items(0), 0u);
  lb.assign(0, 0.1, 3);
  for (int i = 0; i < 3; ++i)
    lb.report_completion(0, 1ms, 0.1 / 3 + 1e-12);
  EXPECT_EQ(lb.load(0), 0.0); // no rounding residue once nothing is queued
}

TEST(Balance, ConcurrentSelectionAndCompletion) {
  ringpipe::load_balancer lb({1.0, 2.0, 1.0});
  constexpr int per_thread = 20000;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&lb, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < per_thread; ++i) {
        const double c = 1.0 + static_cast<double>(rng() % 4);
        const auto d = lb.select_device(c);
        EXPECT_GE(lb.load(d), 0.0);
        lb.report_completion(d, std::chrono::microseconds(1 + d), c);
        if (i % 1000 == 0) (void)lb.rebalance_plan();
      }
    });
  for (auto& t : threads)
    t.join();
  std::size_t completed = 0;
  for (const auto& d : lb.report().devices) {
    completed += d.completed;
    EXPECT_EQ(d.items, 0u);
    EXPECT_EQ(d.load, 0.0);
  }
  EXPECT_EQ(completed, 4u * per_thread);
}

TEST(Balance, BadDevicesAreRefused) {
  EXPECT_THROW(ringpipe::load_balancer(std::vector<double>{}), ringpipe::error);
  EXPECT_THROW(ringpipe::load_balancer({1.0, 0.0}), ringpipe::error);
  ringpipe::load_balancer lb({1.0});
  try {
    lb.assign(3, 1.0);
    ADD_FAILURE() << "device 3 of 1 was accepted";
  } catch (const ringpipe::error& e) {
    EXPECT_NE(std::string(e.what()).find("no device 3"), std::string::npos) << e.what();
  }
}

} // namespace
