// Pipelines tuned for throughput: kernels batched over wide rings still deliver every message
// once, in order, across the environment's devices.

#include <ringpipe/occupancy.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include <test_message.hpp>
#include <test_stream.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <span>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using msg = test_message<16>;

class ObjectiveTest : public ringpipe::testing::device_test {};

class ObjectiveChain : public ObjectiveTest, public ::testing::WithParamInterface<pipeline_objective> {};

// Starts inlet "in" -> test_map on device 0 -> test_map on device `last` -> outlet "out".
void start_chain(pipeline& p, std::size_t last) {
  auto in = p.add_inlet<msg>("in");
  auto k0 = p.add_kernel<msg, msg>("k0", {test_stages_source(16), "test_map"}, on_device(0));
  auto k1 = p.add_kernel<msg, msg>("k1", {test_stages_source(16), "test_map"}, on_device(last));
  auto out = p.add_outlet<msg>("out");
  p.connect(in.out(), k0.in());
  p.connect(k0.out(), k1.in());
  p.connect(k1.out(), out.in());
  p.start();
}

// inlet -> test_map on device 0 -> test_map on the last device -> outlet, driven with push_n and
// pop_n as the benchmark does, every message checked. Automatic counts against 2 host cores: two
// resident PoCL kernels and the application thread exceed them, and so do one PoCL kernel, the
// mover of its staged link to rusticl and the application thread: throughput either way, said
// in plan().
TEST_P(ObjectiveChain, DeliversEveryMessageOnceInOrder) {
  constexpr std::uint32_t count = 300000;
  runtime_options two_cores;
  two_cores.host_cores = 2;
  runtime rt2(topo(), two_cores);
  pipeline_options options;
  options.name = "chain";
  options.objective = GetParam();
  pipeline p(rt2, options);
  start_chain(p, topo().size() - 1);
  const auto o = ringpipe::testing::stream_test_messages<16>(p, "in", "out", count, 2, 5min);
  p.inlet<msg>("in").close();
  p.wait(60s);
  EXPECT_EQ(o.received, count);
  EXPECT_EQ(o.wrong, 0u);
  const auto plan = p.plan();
  EXPECT_TRUE(plan.starts_with("objective: throughput")) << plan;
  EXPECT_NE(plan.find(GetParam() == pipeline_objective::automatic ? " (chosen: " : " (asked for)"), std::string::npos)
      << plan;
  const auto m = p.metrics();
  for (const char* k : {"k0", "k1"})
    EXPECT_EQ(m.stage(k)->mode, "batched") << m.table();
  EXPECT_EQ(p.dry_run().find_link("in.out", "k0.in")->capacity, 65536u) << plan;
}

// The same chain driven in place: messages made in the inlet's write_window and checked in the
// outlet's read_window (runs of 100, so that windows end at odd places before the slot array's
// end), every message once, in order.
TEST_F(ObjectiveTest, InPlaceWindowsDeliverEveryMessageOnceInOrder) {
  constexpr std::uint32_t count = 300000;
  pipeline p(rt(), {"in-place"});
  start_chain(p, topo().size() - 1);
  const auto o = ringpipe::testing::stream_test_messages<16>(p, "in", "out", count, 2, 60s, 100,
                                                             ringpipe::testing::stream_form::windows);
  p.inlet<msg>("in").close();
  p.wait(60s);
  EXPECT_EQ(o.received, count);
  EXPECT_EQ(o.wrong, 0u);
}

// source -> test_map on device 0 -> sink, run to the end: every message arrives once, in order.
void run_source_map_sink(pipeline& p, std::uint32_t count) {
  std::uint32_t next = 0, expected = 0, wrong = 0;
  auto src = p.add_source<msg>("source", [&]() -> std::optional<msg> {
    if (next == count) return std::nullopt;
    return make_test_message<16>(next++);
  });
  auto k = p.add_kernel<msg, msg>("k", {test_stages_source(16), "test_map"}, on_device(0));
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
    if (m.seq != expected || m.check != test_check_after(expected, 1)) ++wrong;
    ++expected;
  });
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.run(5min);
  EXPECT_EQ(expected, count);
  EXPECT_EQ(wrong, 0u);
}

// Host stages: under throughput they back off after every turn (their spin windows took the
// cores a batched kernel needs), under latency they re-poll for a while after progress; plan()
// says which, and every message still arrives once, in order.
TEST_F(ObjectiveTest, HostStagesSpinOnlyUnderLatency) {
  for (const auto objective : {pipeline_objective::latency, pipeline_objective::throughput}) {
    pipeline_options options;
    options.name = "host-stages";
    options.objective = objective;
    pipeline p(rt(), options);
    run_source_map_sink(p, 100000);
    const auto plan = p.plan();
    const bool throughput = objective == pipeline_objective::throughput;
    for (const char* stage : {"source 'source'", "sink 'sink'"})
      EXPECT_NE(plan.find(std::string(stage) + (throughput ? ": backs off after every turn" : ": re-polls for 200 us")),
                std::string::npos)
          << plan;
  }
}

// Automatic on 2 host cores: a source, a kernel on a CPU device and a sink exceed them spinning,
// so the objective is throughput; the host stages then pace their sleeps, and a kernel that can
// stay resident does (batched, the form ran at 0.55-0.69x the inlet/outlet form's rate; resident
// 0.9-1.0x). A device without resident modes, or a pool that would park it, runs it batched.
TEST_F(ObjectiveTest, AutomaticKeepsAKernelBetweenHostStagesResident) {
  runtime_options two_cores;
  two_cores.host_cores = 2;
  runtime rt2(topo(), two_cores);
  pipeline p(rt2, {"between-host-stages"});
  run_source_map_sink(p, 65536);
  const auto plan = p.plan();
  EXPECT_TRUE(plan.starts_with("objective: throughput (chosen: ")) << plan;
  // Resident where it would go persistent: its pool keeps a worker free beside it.
  const bool resident = topo()[0].info().supports(kernel_mode::persistent) && topo()[0].budget().persistent_available();
  EXPECT_EQ(plan.find("1 kernel on CPU devices stays resident") != std::string::npos, resident) << plan;
  const auto m = p.metrics();
  EXPECT_EQ(m.stage("k")->mode == "batched", !resident) << m.table();
}

INSTANTIATE_TEST_SUITE_P(Objectives, ObjectiveChain,
                         ::testing::Values(pipeline_objective::throughput, pipeline_objective::automatic),
                         [](const auto& info) {
                           return info.param == pipeline_objective::throughput ? "throughput" : "automatic";
                         });

} // namespace
