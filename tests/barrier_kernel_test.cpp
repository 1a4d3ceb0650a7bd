// ringpipe::barrier with ring kernels as participants: kernels on two PoCL devices (and a host
// thread) in lock step, releasing each other on the device across the 32-bit wrap; a timeout, a
// failed kernel and a stop reaching every participant; and barriers that could never complete
// refused before anything runs.

#include <ringpipe/barrier.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "phased_kernel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <string_view>
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

// What test_phases_relayed emits each phase (rp_phase_msg).
struct phase_message {
  std::uint32_t phase, pad[3];
};

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
  EXPECT_NE(stats.table().find("(kernel)"), std::string::npos) << stats.table();
}

TEST_F(BarrierKernels, KernelsReleaseEachOtherOnTheDeviceAcrossTheWrap) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  constexpr std::uint32_t phases = 1'000'000, n = 2;
  shared_counters done(*d0, n);
  auto [k0, k1] = kernels_on(*d0, *d1, done, n, phases);
  barrier_options options;
  options.name = "device-only";
  options.first_phase = 0xffffffffu - phases / 2; // wraps half way
  barrier b({{*k0, 0}, {*k1, 0}}, options);
  start(*k0, *k1);
  k0->wait(60s);
  k1->wait(60s);
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

// PoCL kernels waiting on their devices, a batched kernel on rusticl arriving through the host
// (one phase per launch) and a host thread, in lock step.
TEST_F(BarrierKernels, MixedWithABatchedKernelOnRusticlArrivingThroughTheHost) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  std::vector<const device*> pocl{d0};
  if (d1 != nullptr) pocl.push_back(d1);
  constexpr std::uint32_t phases = 1000;
  const auto relayed = static_cast<std::uint32_t>(pocl.size()), host = relayed + 1, n = relayed + 2;
  shared_counters done(*d0, n);
  std::vector<std::unique_ptr<phased_kernel>> kernels;
  std::vector<barrier_participant> members;
  for (std::uint32_t i = 0; i < pocl.size(); ++i) {
    kernels.push_back(make_phased_kernel(rt(), *pocl[i], done, i, n, phases, never, {}, true));
    members.emplace_back(*kernels.back(), 0, "pocl" + std::to_string(i));
  }
  ring_kernel<no_message, phase_message> batched(rt(), topo()[*rusticl],
                                                 kernel_spec(test_phases_source(), "test_phases_relayed"));
  batched.set_arg(0, phases);
  ring<phase_message> emitted(16);
  members.emplace_back(batched, 0, "rusticl");
  members.emplace_back("host");
  std::uint32_t completions = 0, relay_errors = 0;
  barrier_options options;
  options.name = "mixed";
  options.timeout = 60s; // llvmpipe compiles the kernel at its first launch
  options.on_phase = [&](std::uint32_t p) {
    phase_message got{};
    if (!emitted.try_pop(got) || got.phase != p || emitted.try_pop(got)) ++relay_errors; // its phase p, once
    done[relayed].store(p + 1);
    done.completed().store(++completions);
  };
  barrier b(members, options);
  for (auto& k : kernels)
    k->start_buffers(nullptr, nullptr);
  batched.start(emitted);
  host_phases(b, host, done, n, phases, /*completions=*/true);
  batched.wait(60s);
  for (auto& k : kernels)
    k->wait(60s);
  EXPECT_EQ(done.errors(), 0u) << "a participant ran ahead of the barrier";
  EXPECT_EQ(relay_errors, 0u) << "the batched kernel ran a phase early, or not at all";
  EXPECT_EQ(completions, phases);
  const auto stats = b.stats();
  EXPECT_EQ(stats.participants[relayed].arrivals, phases);
  EXPECT_EQ(stats.participants[relayed].waits, phases);
  EXPECT_EQ(batched.stats().launches, phases + 1) << "one launch per phase, and one to end";
}

// One kernel source for both kinds of device (rp_barrier_next): test_phases_any waits on its seat
// on PoCL and, given a null seat on rusticl, arrives through the host, beside a host thread.
TEST_F(BarrierKernels, OneKernelSourceWaitsOnItsSeatOnPoclAndArrivesThroughTheHostOnRusticl) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  const auto d0 = two_pocl().first;
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  constexpr std::uint32_t phases = 300;
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  ring_kernel<no_message, phase_message> on_pocl(rt(), *d0, spec), on_rusticl(rt(), topo()[*rusticl], spec);
  on_pocl.set_arg(1, phases);
  on_rusticl.set_arg(1, phases);
  ring<phase_message> from_pocl(*d0, 16, {"from_pocl"}), from_rusticl(16);
  std::uint32_t completions = 0, errors = 0;
  barrier_options options;
  options.name = "one-source";
  options.timeout = 60s;                    // llvmpipe compiles the kernel at its first launch
  options.on_phase = [&](std::uint32_t p) { // each kernel emitted phase p, once, before arriving
    for (auto* emitted : {&from_pocl, &from_rusticl}) {
      phase_message got{};
      if (!emitted->try_pop(got) || got.phase != p || emitted->try_pop(got)) ++errors;
    }
    ++completions;
  };
  barrier b({{on_pocl, 0, "pocl"}, {on_rusticl, 0, "rusticl"}, "host"}, options);
  on_pocl.start(from_pocl);
  on_rusticl.start(from_rusticl);
  for (std::uint32_t p = 0; p < phases; ++p)
    b.arrive_and_wait(b.participant("host"));
  on_pocl.wait(60s);
  on_rusticl.wait(60s);
  EXPECT_EQ(errors, 0u) << "a kernel ran a phase early, late or twice";
  EXPECT_EQ(completions, phases);
  EXPECT_EQ(on_pocl.stats().launches, 1u) << "the PoCL kernel left its loop instead of waiting on its seat";
  EXPECT_EQ(on_rusticl.stats().launches, phases + 1) << "one launch per phase, and one to end";
  const auto stats = b.stats();
  EXPECT_TRUE(stats.participants[0].on_device);
  EXPECT_EQ(stats.participants[1].arrivals, phases);
}

// kernels_through_host: kernels that could wait on their devices (PoCL) arrive through the host
// instead, one phase per launch, beside a host thread; the phases stay in lock step.
TEST_F(BarrierKernels, KernelsOnPoclArriveThroughTheHostWhenAsked) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  constexpr std::uint32_t phases = 300;
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  ring_kernel<no_message, phase_message> a(rt(), *d0, spec), b(rt(), d1 != nullptr ? *d1 : *d0, spec);
  ring<phase_message> from_a(16), from_b(16);
  for (auto* k : {&a, &b})
    k->set_arg(1, phases);
  std::uint32_t completions = 0, errors = 0;
  barrier_options options;
  options.name = "relayed";
  options.kernels_through_host = true;
  options.on_phase = [&](std::uint32_t p) { // each kernel emitted phase p, once, before arriving
    for (auto* emitted : {&from_a, &from_b}) {
      phase_message got{};
      if (!emitted->try_pop(got) || got.phase != p || emitted->try_pop(got)) ++errors;
    }
    ++completions;
  };
  barrier bar({{a, 0, "a"}, {b, 0, "b"}, "host"}, options);
  a.start(from_a);
  b.start(from_b);
  for (std::uint32_t p = 0; p < phases; ++p)
    bar.arrive_and_wait(bar.participant("host"));
  a.wait(60s);
  b.wait(60s);
  EXPECT_EQ(errors, 0u) << "a kernel ran a phase early, late or twice";
  EXPECT_EQ(completions, phases);
  for (auto* k : {&a, &b}) {
    EXPECT_EQ(k->mode(), kernel_mode::batched);
    EXPECT_EQ(k->stats().launches, phases + 1) << "one launch per phase, and one to end";
  }
}

// Kernels spinning on CPU devices beside host participants, more of them than cores: the barrier
// says so at creation, and names the way out; not when the kernels arrive through the host.
TEST_F(BarrierKernels, SpinnersOutnumberingTheCoresAreSaidAtCreation) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  std::vector<std::string> notices;
  runtime_options two_cores;
  two_cores.host_cores = 2;
  two_cores.notice = [&](std::string_view text) { notices.emplace_back(text); };
  runtime rt2(topo(), two_cores);
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  for (const bool through_host : {false, true}) {
    ring_kernel<no_message, phase_message> a(rt2, *d0, spec), b(rt2, d1 != nullptr ? *d1 : *d0, spec);
    barrier_options options;
    options.name = through_host ? "relayed" : "spinning";
    options.kernels_through_host = through_host;
    barrier bar({{a, 0, "a"}, {b, 0, "b"}, "host"}, options);
  }
  ASSERT_EQ(notices.size(), 1u) << "one notice, for the barrier whose kernels spin";
  for (const char* part : {"barrier 'spinning'", "2 kernel(s) waiting on CPU devices and 1 host participant(s) on 2",
                           "kernels_through_host"})
    EXPECT_NE(notices[0].find(part), std::string::npos) << notices[0];
}

// A kernel held between launches learns of a timeout at once, naming the one that did not come.
TEST_F(BarrierKernels, ABatchedKernelOnRusticlLeavesWhenItsBarrierTimesOut) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  ring_kernel<no_message, phase_message> batched(rt(), topo()[*rusticl],
                                                 kernel_spec(test_phases_source(), "test_phases_relayed"));
  batched.set_arg(0, 100u);
  ring<phase_message> emitted(256);
  barrier_options options;
  options.name = "held";
  options.timeout = 2s;
  barrier b({{batched, 0, "rusticl"}, "absent"}, options);
  batched.start(emitted);
  expect_error([&] { batched.wait(60s); }, make_error_code(errc::kernel_fault),
               {"barrier it waited at failed", "barrier 'held' phase 0 timed out", "'absent' did not arrive"},
               "a kernel held at a timed-out barrier finished");
  EXPECT_EQ(batched.stats().launches, 1u) << "the kernel was launched past its barrier";
}

} // namespace
