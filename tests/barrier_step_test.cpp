// A step on the device at every barrier point (rp_barrier_arrive_last / rp_barrier_release): the
// last kernel to arrive runs it before anyone is released, across the 32-bit wrap; and barriers
// whose host would release phases without that step (a completion function on the host, a host
// participant) fail at the first arrival, naming the kernel. Compiled into barrier_kernel_test.

#include <ringpipe/barrier.hpp>

#include "device_fixture.hpp"
#include "phased_kernel.hpp"

#include <gtest/gtest.h>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::make_stepped_kernel;
using ringpipe::testing::shared_counters;

namespace {

class BarrierStep : public ringpipe::testing::device_test {};

TEST_F(BarrierStep, TheLastKernelToArriveRunsTheStepBeforeAnyoneGoesOn) {
  const auto [d0, d1] = ringpipe::testing::two_pocl_devices(topo());
  RINGPIPE_REQUIRE_DEVICE(d1, "second PoCL device with fine-grained SVM (POCL_DEVICES=\"pthread pthread\")");
  constexpr std::uint32_t phases = ringpipe::testing::spinning_phases, n = 2;
  shared_counters done(*d0, n);
  auto k0 = make_stepped_kernel(rt(), *d0, done, 0, n, phases);
  auto k1 = make_stepped_kernel(rt(), *d1, done, 1, n, phases);
  barrier_options options;
  options.name = "stepped";
  options.first_phase = 0xffffffffu - phases / 2; // wraps half way
  barrier b({{*k0, 0}, {*k1, 0}}, options);
  k0->start_buffers(nullptr, nullptr);
  k1->start_buffers(nullptr, nullptr);
  k0->wait(ringpipe::testing::spinning_wait);
  k1->wait(ringpipe::testing::spinning_wait);
  EXPECT_EQ(done.errors(), 0u) << "a participant went on before the step, or the step ran early";
  EXPECT_EQ(done.completed().load(), phases) << "the step did not run once per phase";
  EXPECT_EQ(b.phase(), options.first_phase + phases);
  EXPECT_FALSE(b.failed());
}

TEST_F(BarrierStep, AHostThatWouldReleasePhasesWithoutTheStepFailsTheBarrierNamingTheKernel) {
  const auto [d0, d1] = ringpipe::testing::two_pocl_devices(topo());
  RINGPIPE_REQUIRE_DEVICE(d0, "PoCL device with fine-grained SVM");
  for (const bool host_member : {false, true}) {
    shared_counters done(*d0, 2);
    auto k = make_stepped_kernel(rt(), *d0, done, 0, 2, 10);
    barrier_options options;
    options.name = host_member ? "with a host" : "with a completion";
    options.timeout = 5s;
    std::vector<barrier_participant> members{{*k, 0, "stepper"}};
    if (host_member)
      members.emplace_back("host");
    else
      options.on_phase = [](std::uint32_t) {};
    // Without a host member, a second stepped kernel (the completion's case has two kernels).
    auto k2 = host_member ? nullptr : make_stepped_kernel(rt(), d1 != nullptr ? *d1 : *d0, done, 1, 2, 10);
    if (k2) members.emplace_back(*k2, 0, "other");
    barrier b(members, options);
    const auto t0 = std::chrono::steady_clock::now();
    k->start_buffers(nullptr, nullptr);
    if (k2) k2->start_buffers(nullptr, nullptr);
    expect_error([&] { k->wait(20s); }, make_error_code(errc::kernel_fault), {"barrier it waited at failed"},
                 "a kernel whose step the host would skip finished");
    if (k2) expect_error([&] { k2->wait(20s); }, make_error_code(errc::kernel_fault), {}, "the other kernel");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "the misplaced step was found late";
    const auto why = b.failure();
    ASSERT_TRUE(why.has_value());
    EXPECT_EQ(why->code(), make_error_code(errc::invalid_argument)) << why->what();
    // Whichever kernel arrived first is named.
    for (const char* text : {"' completes phases on the device (rp_barrier_arrive_last)",
                             host_member ? "host threads take part" : "a completion function on the host"})
      EXPECT_NE(std::string(why->what()).find(text), std::string::npos) << why->what();
    if (host_member)
      expect_error([&] { b.arrive_and_wait(b.participant("host")); }, make_error_code(errc::invalid_argument),
                   {"rp_barrier_arrive_last"}, "arriving at the failed barrier succeeded");
  }
}

} // namespace
