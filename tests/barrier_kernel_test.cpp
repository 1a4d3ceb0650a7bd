// ringpipe::barrier with ring kernels as participants: kernels on two PoCL devices (and a host
// thread) in lock step, releasing each other on the device across the 32-bit wrap; a timeout, a
// failed kernel and a stop reaching every participant; and barriers that could never complete
// refused before anything runs.

#include <ringpipe/barrier.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/occupancy.hpp>

#include "device_fixture.hpp"
#include "phased_kernel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::host_phases;
using ringpipe::testing::make_phased_kernel;
using ringpipe::testing::phased_kernel;
using ringpipe::testing::shared_counters;
constexpr auto never = ringpipe::testing::never_fail;

namespace {

class BarrierKernels : public ringpipe::testing::device_test {
protected:
  // Two PoCL devices sharing SVM, or the test is skipped naming what is missing.
  std::pair<const device*, const device*> two_pocl() { return ringpipe::testing::two_pocl_devices(topo()); }
  static void start(phased_kernel& a, phased_kernel& b) {
    a.start_buffers(nullptr, nullptr);
    b.start_buffers(nullptr, nullptr);
  }
  // test_phases as participants 0 and 1 of `n`, on devices a and b; the first fails at `fail_at`.
  static std::pair<std::unique_ptr<phased_kernel>, std::unique_ptr<phased_kernel>>
  kernels_on(const device& a, const device& b, shared_counters& done, std::uint32_t n, std::uint32_t phases,
             std::uint32_t fail_at = never, bool completions = false) {
    return {make_phased_kernel(rt(), a, done, 0, n, phases, fail_at, {}, completions),
            make_phased_kernel(rt(), b, done, 1, n, phases, never, {}, completions)};
  }
};

// The completion function runs once per phase, before any participant is released: it counts
// phases where every participant reads them once released.
TEST_F(BarrierKernels, KernelsOnTwoDevicesAndAHostThreadMoveInLockStep) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  constexpr std::uint32_t phases = 200, n = 3;
  shared_counters done(*d0, n);
  auto [k0, k1] = kernels_on(*d0, *d1, done, n, phases, never, /*completions=*/true);
  std::uint32_t completions = 0, completion_errors = 0;
  barrier_options options;
  options.name = "mixed";
  options.on_phase = [&](std::uint32_t p) {
    for (std::uint32_t o = 0; o < n; ++o)
      if (done[o].load() != p + 1) ++completion_errors; // all finished phase p, none started p + 1
    done.completed().store(++completions);
  };
  barrier b({{*k0, 0}, {*k1, 0}, "host"}, options);
  start(*k0, *k1);
  host_phases(b, 2, done, n, phases, /*completions=*/true);
  k0->wait(30s);
  k1->wait(30s);
  EXPECT_EQ(done.errors(), 0u) << "a participant ran ahead of the barrier";
  EXPECT_EQ(completion_errors, 0u) << "a phase was completed before every participant finished it";
  EXPECT_EQ(completions, phases);
  const auto stats = b.stats();
  EXPECT_EQ(stats.phases, phases);
  ASSERT_EQ(stats.participants.size(), 3u);
  std::uint64_t last = 0;
  for (const auto& p : stats.participants) {
    EXPECT_EQ(p.arrivals, phases) << p.name;
    EXPECT_EQ(p.waits, phases) << p.name;
    last += p.last_to_arrive;
  }
  EXPECT_TRUE(stats.participants[0].on_device);
  EXPECT_FALSE(stats.participants[2].on_device);
  EXPECT_EQ(last, phases) << "one participant arrives last in each phase";
  EXPECT_NE(stats.table().find("on device"), std::string::npos) << stats.table();
  EXPECT_NE(stats.table().find("counted, not timed"), std::string::npos) << stats.table();
}

TEST_F(BarrierKernels, KernelsReleaseEachOtherOnTheDeviceAcrossTheWrap) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  constexpr std::uint32_t phases = ringpipe::testing::spinning_phases, n = 2;
  shared_counters done(*d0, n);
  auto [k0, k1] = kernels_on(*d0, *d1, done, n, phases);
  barrier_options options;
  options.name = "device-only";
  options.first_phase = 0xffffffffu - phases / 2; // wraps half way
  barrier b({{*k0, 0}, {*k1, 0}}, options);
  start(*k0, *k1);
  k0->wait(ringpipe::testing::spinning_wait);
  k1->wait(ringpipe::testing::spinning_wait);
  EXPECT_EQ(done.errors(), 0u) << "a kernel ran ahead of the barrier";
  EXPECT_EQ(b.phase(), options.first_phase + phases);
  EXPECT_EQ(b.stats().phases, phases);
  EXPECT_FALSE(b.failed());
}

TEST_F(BarrierKernels, AMissingHostParticipantTimesOutTheKernelsNamingIt) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  shared_counters done(*d0, 3);
  auto [k0, k1] = kernels_on(*d0, *d1, done, 3, 10);
  barrier_options options;
  options.name = "late";
  options.timeout = 300ms;
  barrier b({{*k0, 0}, {*k1, 0}, "sleeper"}, options);
  const auto t0 = std::chrono::steady_clock::now();
  start(*k0, *k1);
  // Nobody on the host arrives: the watcher fails phase 0, and the kernels leave their waits.
  for (auto* k : {k0.get(), k1.get()})
    expect_error([&] { k->wait(20s); }, make_error_code(errc::kernel_fault), {"barrier it waited at failed"},
                 "a kernel waiting on a timed-out barrier finished");
  EXPECT_TRUE(b.failed());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, options.timeout + 1s) << "the timeout took too long to act";
  expect_error([&] { (void)b.arrive(2); }, make_error_code(errc::timeout),
               {"barrier 'late' phase 0 timed out", "'sleeper' did not arrive", "'test_phases@"},
               "arriving at a failed barrier succeeded");
}

TEST_F(BarrierKernels, AFailedKernelReleasesTheOthersNamingIt) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  shared_counters done(*d0, 3);
  auto [k0, k1] = kernels_on(*d0, *d1, done, 3, 100, /*fail_at=*/3);
  barrier_options options;
  options.name = "fragile";
  options.timeout = 60s; // the failure, not the timeout, must release them
  barrier b({{*k0, 0}, {*k1, 0}, "host"}, options);
  start(*k0, *k1);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { host_phases(b, 2, done, 3, 100); }, make_error_code(errc::stage_failed),
               {"barrier 'fragile' phase 3", "participant 'test_phases@", "reported error code 7"},
               "the host passed a barrier whose kernel failed");
  expect_error([&k = *k1] { k.wait(20s); }, make_error_code(errc::kernel_fault), {"barrier it waited at failed"},
               "the other kernel passed a failed barrier");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST_F(BarrierKernels, StopNowReleasesAWaitingKernelAndItsDepartureFailsTheNextPhase) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  shared_counters done(*d0, 2);
  auto k = make_phased_kernel(rt(), *d0, done, 0, 2, 100);
  barrier_options options;
  options.name = "stopped";
  options.timeout = 60s;
  barrier b({{*k, 0}, "host"}, options);
  k->start_buffers(nullptr, nullptr);
  while (b.stats().participants[0].arrivals == 0)
    std::this_thread::sleep_for(1ms);
  k->stop_now();
  ASSERT_TRUE(k->wait_exited(20s)) << "a kernel waiting at a barrier did not stop";
  EXPECT_EQ(k->state(), kernel_state::stopped);
  b.arrive_and_wait(1); // phase 0: the kernel had arrived
  expect_error([&] { (void)b.arrive(1); }, make_error_code(errc::stage_failed),
               {"phase 1", "'test_phases@", "stopped before it arrived"}, "a phase without its kernel completed");
}

TEST_F(BarrierKernels, DestroyingABarrierReleasesKernelsAndThreadsThatWaitOnIt) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  shared_counters done(*d0, 4);
  auto [k0, k1] = kernels_on(*d0, *d1, done, 4, 10);
  barrier_options options;
  options.name = "short-lived";
  options.timeout = 60s;
  auto b = std::make_unique<barrier>(std::vector<barrier_participant>{{*k0, 0}, {*k1, 0}, "waiter", "absent"}, options);
  start(*k0, *k1);
  std::atomic<bool> released{false};
  std::string waiter_error;
  std::thread waiter([&, raw = b.get()] {
    try {
      raw->arrive_and_wait(2);
    } catch (const std::exception& e) {
      waiter_error = e.what();
    }
    released = true;
  });
  while (b->stats().participants[0].arrivals == 0 || b->stats().participants[1].arrivals == 0 ||
         b->stats().participants[2].arrivals == 0)
    std::this_thread::sleep_for(1ms);
  b.reset(); // 'absent' never came; everyone else waits in phase 0
  waiter.join();
  EXPECT_TRUE(released);
  EXPECT_NE(waiter_error.find("barrier 'short-lived' was destroyed"), std::string::npos) << waiter_error;
  for (auto* k : {k0.get(), k1.get()})
    expect_error([&] { k->wait(20s); }, make_error_code(errc::kernel_fault), {"barrier it waited at failed"},
                 "a kernel waiting on a destroyed barrier finished");
}

TEST_F(BarrierKernels, BarriersThatCouldNeverCompleteAreRefusedBeforeAnythingRuns) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  shared_counters done(*d0, 4);
  kernel_options batched;
  batched.mode = kernel_mode::batched;
  auto forced = make_phased_kernel(rt(), *d0, done, 0, 2, 1, never, batched);
  expect_error(
      [&] {
        barrier b({{*forced, 0}, "host"});
      },
      make_error_code(errc::unsupported_mode), {"forced to run batched", "barrier 'barrier'"},
      "a barrier took a kernel forced to run batched");
  // One more kernel than the worker pool can hold resident.
  std::vector<std::unique_ptr<phased_kernel>> kernels;
  std::vector<barrier_participant> participants;
  for (std::uint32_t i = 0; i <= d0->budget().budget(); ++i) {
    kernels.push_back(make_phased_kernel(rt(), *d0, done, i, 2, 1));
    participants.emplace_back(*kernels.back(), 0, "k" + std::to_string(i));
  }
  participants.emplace_back("host");
  expect_error([&] { barrier b(participants); }, make_error_code(errc::budget_exceeded),
               {"'k0', 'k1'", "must all be resident at once", "could never complete a phase"},
               "a barrier took more kernels than can be resident at once");
  expect_error(
      [&] {
        barrier b({{*kernels[0], 0}, {*kernels[1], 0}});
      },
      make_error_code(errc::invalid_argument),
      {"names participant 'test_phases@" + std::to_string(d0->index()) + "' twice"},
      "a barrier took two participants of the same name");
  // A kernel already running cannot be given its seat.
  auto started = make_phased_kernel(rt(), *d0, done, 0, 1, 1);
  barrier alone({{*started, 0}});
  started->start_buffers(nullptr, nullptr);
  expect_error(
      [&] {
        barrier b({{*started, 0, "again"}});
      },
      make_error_code(errc::invalid_argument), {"already running", "create the barrier before starting it"},
      "a barrier took a running kernel");
  started->wait(20s);
  EXPECT_EQ(alone.stats().phases, 1u);
  expect_error(
      [&] {
        barrier b({"host"});
        (void)b.arrive(1);
      },
      make_error_code(errc::invalid_argument), {"no participant 1"},
      "arriving as a participant that does not exist succeeded");
}

} // namespace
