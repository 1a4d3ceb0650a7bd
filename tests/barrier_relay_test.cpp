// Kernels that arrive at a barrier through the host, one phase per launch: a batched kernel on
// rusticl beside PoCL kernels waiting on their devices and a host thread; one kernel source for
// both kinds of device (rp_barrier_next); PoCL kernels through the host when the barrier asks
// (kernels_through_host), and the notice where spinning kernels would outnumber the cores; a held
// kernel that learns of a timeout. Compiled into barrier_kernel_test.

#include <ringpipe/barrier.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "phased_kernel.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::host_phases;
using ringpipe::testing::make_phased_kernel;
using ringpipe::testing::phased_kernel;
using ringpipe::testing::shared_counters;

namespace {

constexpr auto never = ringpipe::testing::never_fail;

// What test_phases_relayed and test_phases_any emit each phase (rp_phase_msg).
struct phase_message {
  std::uint32_t phase, pad[3];
};

using phases_kernel = ring_kernel<no_message, phase_message>;

class BarrierRelay : public ringpipe::testing::device_test {
protected:
  std::pair<const device*, const device*> two_pocl() { return ringpipe::testing::two_pocl_devices(topo()); }

  struct two_kernel_run {
    std::uint32_t errors = 0, completions = 0;
    barrier_stats stats;
  };
  /// Two test_phases_any kernels (named a_name, b_name) and a host thread through `phases` phases;
  /// each phase's completion checks that each kernel emitted that phase, once, before arriving.
  static two_kernel_run run_two(phases_kernel& a, const std::string& a_name, ring<phase_message>& from_a,
                                phases_kernel& b, const std::string& b_name, ring<phase_message>& from_b,
                                barrier_options options, std::uint32_t phases) {
    two_kernel_run run;
    for (auto* k : {&a, &b})
      k->set_arg(1, phases);
    options.on_phase = [&](std::uint32_t p) {
      for (auto* emitted : {&from_a, &from_b}) {
        phase_message got{};
        if (!emitted->try_pop(got) || got.phase != p || emitted->try_pop(got)) ++run.errors;
      }
      ++run.completions;
    };
    barrier bar({{a, 0, a_name}, {b, 0, b_name}, "host"}, options);
    a.start(from_a);
    b.start(from_b);
    for (std::uint32_t p = 0; p < phases; ++p)
      bar.arrive_and_wait(bar.participant("host"));
    a.wait(60s);
    b.wait(60s);
    run.stats = bar.stats();
    return run;
  }
};

// PoCL kernels waiting on their devices, a batched kernel on rusticl arriving through the host
// (one phase per launch) and a host thread, in lock step.
TEST_F(BarrierRelay, MixedWithABatchedKernelOnRusticlArrivingThroughTheHost) {
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
  phases_kernel batched(rt(), topo()[*rusticl], kernel_spec(test_phases_source(), "test_phases_relayed"));
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
TEST_F(BarrierRelay, OneKernelSourceWaitsOnItsSeatOnPoclAndArrivesThroughTheHostOnRusticl) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  const auto d0 = two_pocl().first;
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  constexpr std::uint32_t phases = 300;
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  phases_kernel on_pocl(rt(), *d0, spec), on_rusticl(rt(), topo()[*rusticl], spec);
  ring<phase_message> from_pocl(*d0, 16, {"from_pocl"}), from_rusticl(16);
  barrier_options options;
  options.name = "one-source";
  options.timeout = 60s; // llvmpipe compiles the kernel at its first launch
  const auto run = run_two(on_pocl, "pocl", from_pocl, on_rusticl, "rusticl", from_rusticl, options, phases);
  EXPECT_EQ(run.errors, 0u) << "a kernel ran a phase early, late or twice";
  EXPECT_EQ(run.completions, phases);
  EXPECT_EQ(on_pocl.stats().launches, 1u) << "the PoCL kernel left its loop instead of waiting on its seat";
  EXPECT_EQ(on_rusticl.stats().launches, phases + 1) << "one launch per phase, and one to end";
  EXPECT_TRUE(run.stats.participants[0].on_device);
  EXPECT_EQ(run.stats.participants[1].arrivals, phases);
}

// kernels_through_host: kernels that could wait on their devices (PoCL) arrive through the host
// instead, one phase per launch, beside a host thread; the phases stay in lock step.
TEST_F(BarrierRelay, KernelsOnPoclArriveThroughTheHostWhenAsked) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  constexpr std::uint32_t phases = 300;
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  phases_kernel a(rt(), *d0, spec), b(rt(), d1 != nullptr ? *d1 : *d0, spec);
  ring<phase_message> from_a(16), from_b(16);
  barrier_options options;
  options.name = "relayed";
  options.kernels_through_host = true;
  const auto run = run_two(a, "a", from_a, b, "b", from_b, options, phases);
  EXPECT_EQ(run.errors, 0u) << "a kernel ran a phase early, late or twice";
  EXPECT_EQ(run.completions, phases);
  for (auto* k : {&a, &b}) {
    EXPECT_EQ(k->mode(), kernel_mode::batched);
    EXPECT_EQ(k->stats().launches, phases + 1) << "one launch per phase, and one to end";
  }
}

// Kernels spinning on CPU devices beside host participants, or alone, more of them than cores: the
// barrier says so at creation, and names the way out; not when the kernels arrive through the host.
TEST_F(BarrierRelay, SpinnersOutnumberingTheCoresAreSaidAtCreation) {
  const auto [d0, d1] = two_pocl();
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  std::vector<std::string> notices;
  runtime_options two_cores;
  two_cores.host_cores = 2;
  two_cores.notice = [&](std::string_view text) { notices.emplace_back(text); };
  runtime rt2(topo(), two_cores);
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  for (const bool through_host : {false, true}) {
    phases_kernel a(rt2, *d0, spec), b(rt2, d1 != nullptr ? *d1 : *d0, spec);
    barrier_options options;
    options.name = through_host ? "relayed" : "spinning";
    options.kernels_through_host = through_host;
    barrier bar({{a, 0, "a"}, {b, 0, "b"}, "host"}, options);
  }
  ASSERT_EQ(notices.size(), 1u) << "one notice, for the barrier whose kernels spin";
  for (const char* part : {"barrier 'spinning'", "2 kernel(s) waiting on CPU devices and 1 host participant(s) on 2",
                           "kernels_through_host"})
    EXPECT_NE(notices[0].find(part), std::string::npos) << notices[0];

  // Kernels alone: two fit in two cores; on one, each phase waits for the scheduler.
  notices.clear();
  for (const unsigned cores : {2u, 1u}) {
    runtime_options options_rt = two_cores;
    options_rt.host_cores = cores;
    runtime rt_cores(topo(), options_rt);
    phases_kernel a(rt_cores, *d0, spec), b(rt_cores, d1 != nullptr ? *d1 : *d0, spec);
    barrier_options options;
    options.name = "kernels on " + std::to_string(cores) + " core(s)";
    barrier bar({{a, 0, "a"}, {b, 0, "b"}}, options);
  }
  ASSERT_EQ(notices.size(), 1u) << "one notice, for the kernels that outnumber the cores";
  for (const char* part : {"barrier 'kernels on 1 core(s)'", "2 kernel(s) waiting on CPU devices on 1 core(s)",
                           "cannot all run at once", "kernels_through_host"})
    EXPECT_NE(notices[0].find(part), std::string::npos) << notices[0];
}

// A kernel held between launches learns of a timeout at once, naming the one that did not come.
TEST_F(BarrierRelay, ABatchedKernelOnRusticlLeavesWhenItsBarrierTimesOut) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  phases_kernel batched(rt(), topo()[*rusticl], kernel_spec(test_phases_source(), "test_phases_relayed"));
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
