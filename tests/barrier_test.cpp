// ringpipe::barrier with host participants: phases in lock step, the completion function between
// phases, split-phase arrival, the 32-bit wrap, and the failure paths (a participant that does not
// arrive, a failed participant, a completion that throws) reaching every waiter.

#include <ringpipe/barrier.hpp>
#include <ringpipe/error.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

std::vector<barrier_participant> names(std::size_t n) {
  std::vector<barrier_participant> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back("p" + std::to_string(i));
  return out;
}

barrier_options named(std::string name, std::chrono::nanoseconds timeout = 10s) {
  barrier_options options;
  options.name = std::move(name);
  options.timeout = timeout;
  return options;
}

// Every thread runs `phases` phases; in each it records the phase it is in. No thread may see
// another one phase behind after the barrier, or ahead before it.
void run_in_lock_step(barrier& b, std::size_t threads, std::uint32_t phases) {
  std::vector<std::atomic<std::uint32_t>> at(threads);
  std::atomic<std::uint32_t> errors{0};
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (std::uint32_t k = 0; k < phases; ++k) {
          at[t].store(k);
          for (std::size_t o = 0; o < threads; ++o)
            if (at[o].load() > k || at[o].load() + 1 < k) ++errors; // none ahead, none two behind
          b.arrive_and_wait(t);
          for (std::size_t o = 0; o < threads; ++o)
            if (at[o].load() < k) ++errors; // everyone finished phase k
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "participant " << t << ": " << e.what();
        b.fail(e.what()); // releases the others
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(errors.load(), 0u) << "a participant ran ahead of the barrier";
}

TEST(Barrier, ParticipantsMoveInLockStepAndTheCompletionRunsBetweenPhases) {
  constexpr std::size_t threads = 4;
  constexpr std::uint32_t phases = 2000;
  std::vector<std::uint32_t> seen;
  barrier* self = nullptr;
  barrier_options options;
  options.name = "lock-step";
  options.on_phase = [&](std::uint32_t phase) {
    // Every participant arrived at this phase and none is released yet.
    EXPECT_EQ(self->phase(), phase);
    seen.push_back(phase);
  };
  barrier b(names(threads), options);
  self = &b;
  run_in_lock_step(b, threads, phases);
  ASSERT_EQ(seen.size(), phases);
  for (std::uint32_t k = 0; k < phases; ++k)
    ASSERT_EQ(seen[k], k) << "the completion ran out of order or twice";
  const auto stats = b.stats();
  EXPECT_EQ(stats.phases, phases);
  for (const auto& p : stats.participants) {
    EXPECT_EQ(p.arrivals, phases);
    EXPECT_EQ(p.waits, phases);
  }
}

TEST(Barrier, PhasesCountAcrossThe32BitWrap) {
  barrier_options options;
  options.first_phase = 0xffffffffu - 50;
  barrier b(names(3), options);
  run_in_lock_step(b, 3, 200);
  EXPECT_EQ(b.phase(), options.first_phase + 200) << "the phase counter did not wrap";
  EXPECT_EQ(b.stats().phases, 200u);
}

// Split phase: a participant arrives, works, then waits; the others' arrivals release it.
TEST(Barrier, SplitPhaseArrivalLetsAParticipantWorkBeforeItWaits) {
  barrier b({"early", "late"});
  const auto token = b.arrive(b.participant("early"));
  EXPECT_EQ(token.phase, 0u);
  EXPECT_EQ(b.phase(), 0u) << "released before everyone arrived";
  std::thread late([&] { b.arrive_and_wait(b.participant("late")); });
  b.wait(token);
  late.join();
  EXPECT_EQ(b.phase(), 1u);
}

TEST(Barrier, ABadParticipantIsRefusedNamingTheParticipants) {
  expect_error([] { barrier b(std::vector<barrier_participant>{}); }, make_error_code(errc::invalid_argument),
               {"at least one participant"}, "a barrier without participants");
  expect_error(
      [] {
        barrier b({"a", "a"});
      },
      make_error_code(errc::invalid_argument), {"'a' twice"}, "a participant named twice");
  barrier b({"left", "right"}, named("pair"));
  expect_error([&] { (void)b.participant("middle"); }, make_error_code(errc::invalid_argument),
               {"barrier 'pair'", "'middle'", "'left', 'right'"}, "an unknown participant");
  (void)b.arrive(0);
  expect_error([&] { (void)b.arrive(0); }, make_error_code(errc::invalid_argument), {"'left' arrived twice in phase 0"},
               "a second arrival in one phase");
}

// One participant never arrives: every waiter gets the same timeout at once, naming who did not
// arrive, the phase and who did; later calls get it too.
TEST(Barrier, AMissingParticipantTimesOutEveryWaiterNamingIt) {
  barrier_options options;
  options.name = "stuck";
  options.timeout = 200ms;
  barrier b({"a", "b", "c"}, options);
  std::vector<std::string> messages(2);
  std::vector<std::thread> waiters;
  for (std::size_t i = 0; i < 2; ++i)
    waiters.emplace_back([&, i] {
      try {
        b.arrive_and_wait(i);
      } catch (const error& e) {
        EXPECT_EQ(e.code(), make_error_code(errc::timeout));
        messages[i] = e.what();
      }
    });
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& w : waiters)
    w.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the waiters were not released together";
  for (const auto& m : messages) {
    EXPECT_NE(m.find("barrier 'stuck' phase 0 timed out"), std::string::npos) << m;
    EXPECT_NE(m.find("'c' did not arrive ('a', 'b' did)"), std::string::npos) << m;
  }
  EXPECT_TRUE(b.failed());
  expect_error([&] { (void)b.arrive(2); }, make_error_code(errc::timeout), {"'c' did not arrive"},
               "an arrival after the failure");
}

TEST(Barrier, AFailedParticipantReleasesEveryWaiterWithItsReason) {
  barrier b({"a", "b", "c"}, named("stopping", 60s));
  std::atomic<int> released{0};
  std::vector<std::thread> waiters;
  for (std::size_t i = 0; i < 2; ++i)
    waiters.emplace_back([&, i] {
      expect_error([&] { b.arrive_and_wait(i); }, make_error_code(errc::cancelled),
                   {"barrier 'stopping' failed in phase 0", "stage 'c' stopped"}, "a wait after the failure");
      ++released;
    });
  while (b.stats().participants[1].arrivals == 0 || b.stats().participants[0].arrivals == 0)
    std::this_thread::sleep_for(1ms);
  b.fail("stage 'c' stopped");
  for (auto& w : waiters)
    w.join();
  EXPECT_EQ(released.load(), 2);
}

TEST(Barrier, OnFailureRunsOnceWithTheError) {
  // The hook a barrier over ranks uses to tell the other ranks: once, by a timeout or by fail().
  for (const bool by_timeout : {true, false}) {
    std::atomic<int> calls{0};
    std::string said;
    auto options = named("told", by_timeout ? 100ms : 60s);
    options.on_failure = [&](const error& e) {
      ++calls;
      said = e.what();
    };
    barrier b({"a", "b"}, options);
    if (by_timeout) {
      EXPECT_THROW(b.arrive_and_wait(0), error);
    } else {
      b.fail("gave up");
    }
    b.fail("and again");
    EXPECT_THROW((void)b.arrive(1), error);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_NE(said.find(by_timeout ? "'b' did not arrive" : "gave up"), std::string::npos) << said;
  }
}

TEST(Barrier, ACompletionThatThrowsFailsThePhaseForEveryone) {
  barrier_options options;
  options.name = "completion";
  options.on_phase = [](std::uint32_t phase) {
    if (phase == 3) throw std::runtime_error("reduction overflowed");
  };
  barrier b(names(2), options);
  std::vector<std::string> messages(2);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < 2; ++t)
    pool.emplace_back([&, t] {
      try {
        for (int k = 0; k < 10; ++k)
          b.arrive_and_wait(t);
      } catch (const error& e) {
        messages[t] = e.what();
      }
    });
  for (auto& th : pool)
    th.join();
  for (const auto& m : messages)
    EXPECT_NE(m.find("barrier 'completion' phase 3: its completion function threw: reduction overflowed"),
              std::string::npos)
        << m;
  EXPECT_EQ(b.stats().phases, 3u);
}

// The participant the others wait for shows up in the metrics.
TEST(Barrier, MetricsNameWhoTheOthersWaitedFor) {
  barrier b({"fast", "slow"}, named("metrics"));
  std::thread slow([&] {
    for (int k = 0; k < 20; ++k) {
      std::this_thread::sleep_for(5ms);
      b.arrive_and_wait(1);
    }
  });
  for (int k = 0; k < 20; ++k)
    b.arrive_and_wait(0);
  slow.join();
  const auto stats = b.stats();
  // A descheduled fast thread may arrive last now and then on a loaded machine.
  EXPECT_GE(stats.participants[1].last_to_arrive, 15u);
  EXPECT_EQ(stats.participants[0].last_to_arrive + stats.participants[1].last_to_arrive, 20u);
  EXPECT_GT(stats.participants[0].wait_p50_us, 1000.0) << "the fast participant waited about 5 ms a phase";
  EXPECT_NE(stats.table().find("slow"), std::string::npos);
  EXPECT_EQ(stats.table().find("on device"), std::string::npos) << "only host participants: every wait is timed";
}

} // namespace
