// rp_poll's idle budget as kernels read it (cl/ringpipe/stage.clh). llvmpipe runs a one-item group
// in a vector of 8 lanes; the seven past its end run the polling loop too, read a budget of 0,
// and the loop ends only when every lane has left it. A budget of 0 must therefore send a kernel
// away at its first idle poll, and a persistent kernel's "never" is a value of its own
// (idle_forever). With 0 meaning "never", a one-item kernel's batch on llvmpipe polled in those
// lanes until the driver cut its loops: about 25 ms a launch, whatever the batch.

#include <ringpipe/kernel.hpp>
#include <ringpipe/program.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <array>

using namespace ringpipe;

namespace {

using poll_contract_test = ringpipe::testing::device_test;

constexpr const char* poll_source = R"(#include <ringpipe/stage.clh>
// Idle polls until rp_poll says to leave, at most `polls`: out[0] the poll it left at (0: never),
// out[1] the state it left in, out[2] what the kernels call "never".
__kernel void poll_probe(__global rp_control* ctl, __global uint* out, uint polls) {
  uint idle_polls = 0;
  out[0] = 0;
  out[1] = 0;
  out[2] = RP_IDLE_FOREVER;
  for (uint k = 1; k <= polls; ++k) {
    const uint leave = rp_poll(ctl, true, true, &idle_polls);
    if (leave != 0) {
      out[0] = k;
      out[1] = leave;
      return;
    }
  }
}
)";

// Runs poll_probe over a control block whose idle budget is `budget` (the rest zeros).
std::array<std::uint32_t, 3> poll_until_leaving(const device& dev, std::uint32_t budget, std::uint32_t polls) {
  const std::string source = resolve_includes(poll_source, "poll_contract_test.cpp");
  const auto program = dev.programs().get(dev, source, base_build_options(dev), "poll_probe");
  cl::Kernel kernel(program, "poll_probe");
  control_block ctl{};
  ctl.idle_budget = budget;
  cl::Buffer ctl_buffer(dev.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof ctl, &ctl);
  std::array<std::uint32_t, 3> out{};
  cl::Buffer out_buffer(dev.context(), CL_MEM_READ_WRITE, sizeof out);
  kernel.setArg(0, ctl_buffer);
  kernel.setArg(1, out_buffer);
  kernel.setArg(2, polls);
  cl::CommandQueue queue(dev.context(), dev.cl_device());
  queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(1), cl::NDRange(1));
  queue.enqueueReadBuffer(out_buffer, CL_TRUE, 0, sizeof out, out.data());
  return out;
}

TEST_F(poll_contract_test, AControlBlockOfZerosLeavesAtTheFirstIdlePoll) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    const auto out = poll_until_leaving(dev, 0, 1000);
    EXPECT_EQ(out[0], 1u) << "a lane reading zeros polled on (0: for all 1,000 polls)";
    EXPECT_EQ(out[1], static_cast<std::uint32_t>(kernel_state::parked));
  }
}

TEST_F(poll_contract_test, ABudgetOfNPollsLeavesAtTheNth) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    for (const std::uint32_t budget : {1u, 3u, 64u}) {
      const auto out = poll_until_leaving(dev, budget, 1000);
      EXPECT_EQ(out[0], budget);
      EXPECT_EQ(out[1], static_cast<std::uint32_t>(kernel_state::parked));
    }
  }
}

TEST_F(poll_contract_test, APersistentKernelsBudgetNeverLeaves) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    const auto out = poll_until_leaving(dev, idle_forever, 1000);
    EXPECT_EQ(out[2], idle_forever) << "the kernels' RP_IDLE_FOREVER and the host's idle_forever differ";
    EXPECT_EQ(out[0], 0u) << "left at poll " << out[0];
  }
}

} // namespace
