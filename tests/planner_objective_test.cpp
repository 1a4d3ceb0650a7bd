// The pipeline's objective as the planner applies it, against topologies the test describes (no
// OpenCL platform needed): latency, throughput (batched kernels, wide rings) and automatic (busy
// threads counted against the host's cores), and what the user fixed staying fixed.

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "planner_fixture.hpp"

#include "../src/core/process_fence.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <tuple>

using namespace ringpipe;
using namespace ringpipe::testing;

namespace {
// The throughput objective: kernels that name no mode run batched, links that name no capacity
// get rings of about 1 MiB (65,536 slots of 8 bytes at most); what the user set stays; plan() says
// which came from the objective. The latency objective changes nothing.
TEST_F(PlannerTest, ThroughputObjectiveBatchesKernelsAndWidensRingsTheUserLeftOpen) {
  for (const auto objective : {pipeline_objective::latency, pipeline_objective::throughput}) {
    const bool throughput = objective == pipeline_objective::throughput;
    auto o = opts("objective", false);
    o.objective = objective;
    pipeline p(rt, o);
    auto src = p.add_source<sample>("src", no_messages());
    auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
    kernel_options parked;
    parked.mode = kernel_mode::parked;
    auto b = p.add_kernel<sample, sample>("b", map_kernel("clip"), on_device(1), parked);
    auto sink = p.add_sink<sample>("sink", [](const sample&) {});
    link_options small;
    small.capacity = 16;
    p.connect(src.out(), a.in());
    p.connect(a.out(), b.in(), small);
    p.connect(b.out(), sink.in());
    const auto plan = p.dry_run();
    EXPECT_EQ(plan.objective, throughput ? "throughput" : "latency");
    EXPECT_EQ(plan.find_stage("a")->mode, throughput ? std::optional(kernel_mode::batched) : std::nullopt);
    EXPECT_EQ(plan.find_stage("a")->mode_from_objective, throughput);
    EXPECT_EQ(plan.find_stage("b")->mode, kernel_mode::parked) << "a forced mode stays";
    EXPECT_EQ(plan.find_link("src.out", "a.in")->capacity, throughput ? 65536u : 1024u) << "8-byte messages";
    EXPECT_EQ(plan.find_link("a.out", "b.in")->capacity, 16u) << "a capacity the user set stays";
    EXPECT_EQ(plan.objective_reason, "asked for");
    if (throughput) {
      EXPECT_NE(plan.text().find("kernel 'a' on device 0, batched (objective)"), std::string::npos) << plan.text();
      EXPECT_NE(plan.text().find("kernel 'b' on device 1, parked (forced)"), std::string::npos) << plan.text();
    }
  }
}

// Automatic: latency while the threads busy under it fit the host's cores. Counted: kernels that
// stay resident on CPU devices (not GPU ones, not batched ones), the runtime's threads that run
// host stages (at most as many as it has: 2 here), one application thread at inlets and outlets.
struct objective_case {
  const char* what;
  std::vector<ringpipe::testing::described_device> devices;
  bool host_ends;        // source and sink (else inlet and outlet)
  std::uint32_t kernels; // chained, kernel i on device i % devices
  bool first_batched;    // the first kernel forced batched
  unsigned cores;
  const char* objective;
  const char* reason;
  bool kept_resident = false; // throughput, with the CPU kernels resident beside the paced host stages
};

TEST(AutomaticObjective, CountsBusyThreadsAgainstTheHostsCores) {
  using ringpipe::testing::gpu_without_svm;
  using ringpipe::testing::pocl_cpu;
  using ringpipe::testing::rusticl_cpu;
  const std::vector<objective_case> cases = {
      {"one PoCL kernel, application ends",
       {pocl_cpu()},
       false,
       1,
       false,
       2,
       "latency",
       "chosen: 2 threads busy under latency fit 2 host cores (1 resident kernel on CPU devices, 0 runtime threads "
       "for 0 host stages, 1 application thread)"},
      {"two PoCL kernels, application ends",
       {pocl_cpu("a"), pocl_cpu("b")},
       false,
       2,
       false,
       2,
       "throughput",
       "chosen: 3 threads busy under latency exceed 2 host cores (2 resident kernels on CPU devices, 0 runtime "
       "threads for 0 host stages, 1 application thread)"},
      {"two PoCL kernels on 16 cores", {pocl_cpu("a"), pocl_cpu("b")}, false, 2, false, 16, "latency", "fit 16"},
      // A batched kernel on a CPU device runs its batches on host threads: it counts too.
      {"one batched of two",
       {pocl_cpu("a"), pocl_cpu("b")},
       false,
       2,
       true,
       2,
       "throughput",
       "(1 resident kernel and 1 batched kernel on CPU devices"},
      {"one batched of two on 16 cores", {pocl_cpu("a"), pocl_cpu("b")}, false, 2, true, 16, "latency", "fit 16"},
      {"GPU kernels take no host core",
       {gpu_without_svm(), gpu_without_svm()},
       false,
       2,
       false,
       2,
       "latency",
       "(0 resident kernels"},
      {"a rusticl kernel, application ends",
       {rusticl_cpu()},
       false,
       1,
       false,
       2,
       "latency",
       "2 threads busy under latency fit 2 host cores (0 resident kernels and 1 batched kernel on CPU devices, 0 "
       "runtime threads for 0 host stages, 1 application thread)"},
      // rusticl kernels are batched anyway, on llvmpipe's threads: host stages that spin beside them
      // took the cores their batches needed.
      {"source, rusticl kernel, sink",
       {rusticl_cpu()},
       true,
       1,
       false,
       2,
       "throughput",
       "3 threads busy under latency exceed 2 host cores (0 resident kernels and 1 batched kernel on CPU devices, 2 "
       "runtime threads for 2 host stages)"},
      // Under throughput host stages pace their sleeps: together they take one core's share, and
      // a PoCL kernel beside them keeps the other core resident (batched: 0.55-0.69x the
      // inlet/outlet form's rate; resident: 0.9-1.0x).
      {"source, PoCL kernel, sink",
       {pocl_cpu()},
       true,
       1,
       false,
       2,
       "throughput",
       "3 threads busy under latency exceed 2 host cores (1 resident kernel on CPU devices, 2 runtime threads for 2 "
       "host stages); 1 kernel on CPU devices stays resident: 2 busy with the host stages paced on one fit 2 host "
       "cores",
       true},
      {"source, PoCL kernel, sink on 1 core", {pocl_cpu()}, true, 1, false, 1, "throughput", "exceed 1 host core"},
      // A pool of one worker would park it: batched did better there.
      {"source, PoCL kernel of a one-worker pool, sink",
       {{"Portable Computing Language", "cpu", true, 1, "one worker", device_type::cpu}},
       true,
       1,
       false,
       2,
       "throughput",
       "3 threads busy under latency exceed 2 host cores"},
      {"source, two PoCL kernels, sink",
       {pocl_cpu("a"), pocl_cpu("b")},
       true,
       2,
       false,
       2,
       "throughput",
       "4 threads busy under latency exceed 2 host cores"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    runtime_options o;
    o.threads = 2;
    o.host_cores = c.cores;
    runtime rt(describe(c.devices), o);
    pipeline p(rt, opts("auto", false));
    std::size_t last = 0;
    if (c.host_ends)
      last = p.add_source<sample>("src", no_messages()).id;
    else
      last = p.add_inlet<sample>("in").id;
    for (std::uint32_t k = 0; k < c.kernels; ++k) {
      kernel_options ko;
      if (k == 0 && c.first_batched) ko.mode = kernel_mode::batched;
      const auto stage = p.add_kernel<sample, sample>("k" + std::to_string(k), map_kernel("twice"),
                                                      on_device(k % c.devices.size()), ko);
      p.connect(output_port<sample>{last}, stage.in());
      last = stage.id;
    }
    if (c.host_ends)
      p.connect(output_port<sample>{last}, p.add_sink<sample>("sink", [](const sample&) {}).in());
    else
      p.connect(output_port<sample>{last}, p.add_outlet<sample>("out").in());
    const auto plan = p.dry_run();
    EXPECT_EQ(plan.objective, c.objective) << plan.text();
    EXPECT_NE(plan.objective_reason.find(c.reason), std::string::npos) << plan.objective_reason;
    EXPECT_NE(plan.text().find("objective: " + plan.objective + " (chosen: "), std::string::npos) << plan.text();
    const bool throughput = plan.objective == "throughput";
    EXPECT_EQ(plan.find_stage("k0")->mode_from_objective, throughput && !c.first_batched && !c.kept_resident);
    EXPECT_EQ(plan.objective_reason.find("stays resident") != std::string::npos, c.kept_resident)
        << plan.objective_reason;
    // Automatic widens rings under either choice: resident kernels hand a backlog to spans; twice
    // as wide into a kernel on a CPU device without shared memory (one staging lane).
    const auto& first = c.devices.front();
    const bool one_lane = first.type == device_type::cpu && !first.shared_memory;
    EXPECT_EQ(plan.links.front().capacity, one_lane ? 131072u : 65536u) << "8-byte messages";
    // The io threads it asks for: a host stage each, and each kernel whose proxy copies batches.
    std::size_t copying = 0;
    for (std::uint32_t k = 0; k < c.kernels; ++k)
      if (!c.devices[k % c.devices.size()].shared_memory) ++copying;
    const auto movers = std::count_if(plan.links.begin(), plan.links.end(), [](const auto& l) { return l.mover; });
    EXPECT_EQ(plan.host_stage_threads, (c.host_ends ? 2u : 0u) + static_cast<std::size_t>(movers));
    EXPECT_EQ(plan.copying_proxy_threads, copying);
  }
}

// A many-core host: the source, the host function, the sink and the proxy that copies a GPU
// kernel's batches each get an io thread; the planner counts the runtime's threads by what it may
// grow to (3 of its 16, where it starts with 2 at most).
TEST(AutomaticObjective, CountsTheThreadsTheRuntimeMayGrowTo) {
  using ringpipe::testing::gpu_without_svm;
  runtime_options o;
  o.host_cores = 16;
  runtime rt(describe({gpu_without_svm()}), o);
  pipeline p(rt, opts("many cores", false));
  auto src = p.add_source<sample>("src", no_messages());
  auto scale = p.add_host<sample, sample>("scale", [](const sample& s) { return s; });
  auto k = p.add_kernel<sample, sample>("k", map_kernel("twice"), on_device(0));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), scale.in());
  p.connect(scale.out(), k.in());
  p.connect(k.out(), sink.in());
  const auto plan = p.dry_run();
  EXPECT_NE(plan.objective_reason.find("3 runtime threads for 3 host stages"), std::string::npos)
      << plan.objective_reason;
  EXPECT_NE(plan.text().find("runtime threads asked for: 4 (3 host stages, 1 kernel whose proxy copies its batches)"),
            std::string::npos)
      << plan.text();
  EXPECT_EQ(rt.thread_limit(), 16u);
  EXPECT_LE(rt.threads(), 2u) << "a plan holds nothing";
}

// A capacity the user fixed keeps latency: batched launches pay off only over wide rings.
TEST_F(PlannerTest, AutomaticKeepsLatencyWhenTheUserFixedTheRingCapacity) {
  for (const std::uint32_t capacity : {0u, 16u, 1024u}) {
    auto o = opts("small-rings", false);
    o.capacity = capacity;
    pipeline p(rt, o);
    two_kernels(p, 0, 1);
    const auto plan = p.dry_run();
    EXPECT_EQ(plan.objective, capacity == 0 ? "throughput" : "latency") << plan.text();
    if (capacity != 0) {
      EXPECT_EQ(plan.objective_reason, "chosen: pipeline_options::capacity is set to " + std::to_string(capacity) +
                                           " slots; batched launches need the throughput objective's wide rings");
    }
  }
}

// A capacity given for the whole pipeline is kept under either objective.
TEST_F(PlannerTest, APipelineCapacityOverridesTheObjectives) {
  auto o = opts("fixed", false);
  o.objective = pipeline_objective::throughput;
  o.capacity = 32;
  pipeline p(rt, o);
  auto src = p.add_source<sample>("src", no_messages());
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), sink.in());
  EXPECT_EQ(p.dry_run().find_link("src.out", "sink.in")->capacity, 32u);
}

// A kernel on a CPU device without shared memory (rusticl) runs its batches through mirrors with
// one staging lane, up to half its input ring: under throughput its wide rings double (131,072
// 8-byte slots), so that a batch of about 1 MiB is half of one. PoCL kernels (shared memory), a
// GPU without it and a rusticl kernel given two lanes (each batch a quarter), latency's narrow
// rings and a capacity the user gave stay as they are.
TEST(OneLaneMirrors, ThroughputDoublesTheWideRingsOfKernelsOnCpuDevicesWithoutSharedMemory) {
  using ringpipe::testing::gpu_without_svm;
  runtime three{describe({pocl_cpu("cpu0"), rusticl_cpu(), gpu_without_svm()}), two_cores()};
  for (const auto objective : {pipeline_objective::latency, pipeline_objective::throughput}) {
    auto o = opts("lanes", false);
    o.objective = objective;
    pipeline p(three, o);
    link_options given;
    given.capacity = 256;
    auto src = p.add_source<sample>("src", no_messages());
    output_port<sample> last = src.out();
    for (auto [name, device, lanes] :
         {std::tuple{"pocl", 0, 0u}, {"pocl_b", 0, 0u}, {"rusticl", 1, 0u}, {"rusticl_2", 1, 2u}, {"gpu", 2, 0u}}) {
      kernel_options k;
      k.staging_lanes = lanes;
      auto s = p.add_kernel<sample, sample>(name, map_kernel("twice"), on_device(device), k);
      p.connect(last, s.in(), std::string(name) == "pocl" ? given : link_options{});
      last = s.out();
    }
    p.connect(last, p.add_sink<sample>("sink", [](const sample&) {}).in());
    const auto plan = p.dry_run();
    const auto wide = [&](std::uint32_t slots) { return objective == pipeline_objective::throughput ? slots : 1024u; };
    EXPECT_EQ(plan.find_link("src.out", "pocl.in")->capacity, 256u) << "a capacity the user gave stays";
    EXPECT_EQ(plan.find_link("pocl.out", "pocl_b.in")->capacity, wide(65536));
    EXPECT_EQ(plan.find_link("pocl_b.out", "rusticl.in")->capacity, wide(131072));
    EXPECT_EQ(plan.find_link("rusticl.out", "rusticl_2.in")->capacity, wide(131072));
    EXPECT_EQ(plan.find_link("rusticl_2.out", "gpu.in")->capacity, wide(65536)) << "two lanes";
    EXPECT_EQ(plan.find_link("gpu.out", "sink.in")->capacity, wide(65536));
  }
}

// Idle stages sleep until a push wakes them where the kernel offers the process-wide fence that
// needs (membarrier); elsewhere they keep polling, and the plan says so. Whichever applies here is
// checked.
TEST_F(PlannerTest, ThePlanSaysWhereIdleStagesKeepPolling) {
  pipeline p(rt, opts("idle", false));
  auto src = p.add_source<sample>("src", no_messages());
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), sink.in());
  const auto plan = p.dry_run();
  const bool offered = detail::process_wide_fence_offered();
  EXPECT_EQ(plan.idle_polling_reason.empty(), offered) << plan.text();
  EXPECT_EQ(plan.text().find("keep polling") == std::string::npos, offered) << plan.text();
  std::printf("process-wide fence %s: %s\n", offered ? "offered" : "refused", plan.text().c_str());
}

} // namespace

// A farm whose replicas on CPU devices fill the host's cores asks for one io thread
// (runtime::narrow_threads); on more cores, on a GPU, beside a host function, or without a farm,
// it asks for its stages.
TEST(FarmThreads, OneIoThreadWhereItsCpuReplicasFillTheCores) {
  const auto farm_plan = [](runtime& rt, std::vector<std::size_t> devices) {
    pipeline p(rt, opts("farm", false));
    auto src = p.add_source<sample>("src", no_messages());
    farm_options o;
    o.devices = std::move(devices);
    auto farm = p.add_farm<sample, sample>("work", map_kernel("twice"), o);
    auto sink = p.add_sink<sample>("sink", [](const sample&) {});
    p.connect(src.out(), farm.in());
    p.connect(farm.out(), sink.in());
    return p.dry_run();
  };
  runtime_options two;
  two.host_cores = 2;
  runtime cpus(ci_topology(), two);
  const auto full = farm_plan(cpus, {0, 2});
  EXPECT_EQ(
      full.one_io_thread_reason,
      "a farm whose 2 kernels on CPU devices fill the host's 2 cores: its host stages take turns on one io thread");
  EXPECT_NE(full.text().find("runtime threads asked for: one (a farm whose 2 kernels"), std::string::npos)
      << full.text();
  EXPECT_EQ(farm_plan(cpus, {0}).one_io_thread_reason, "") << "one replica leaves a core";
  pipeline computed(cpus, opts("farm and host function", false));
  auto items = computed.add_source<sample>("src", no_messages());
  farm_options both;
  both.devices = {0, 2};
  auto work = computed.add_farm<sample, sample>("work", map_kernel("twice"), both);
  auto scale = computed.add_host<sample, sample>("scale", [](const sample& s) { return s; });
  auto out = computed.add_sink<sample>("sink", [](const sample&) {});
  computed.connect(items.out(), work.in());
  computed.connect(work.out(), scale.in());
  computed.connect(scale.out(), out.in());
  EXPECT_EQ(computed.dry_run().one_io_thread_reason, "") << "a host function would hold up the dealer";
  runtime_options four = two;
  four.host_cores = 4;
  runtime many(ci_topology(), four);
  EXPECT_EQ(farm_plan(many, {0, 1, 2}).one_io_thread_reason, "");
  runtime gpus(describe({gpu_without_svm(), gpu_without_svm()}), two);
  EXPECT_EQ(farm_plan(gpus, {0, 1}).one_io_thread_reason, "") << "a GPU's replicas use no host core";
  pipeline chain(cpus, opts("no farm", false));
  auto src = chain.add_source<sample>("src", no_messages());
  auto a = chain.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
  auto b = chain.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(2));
  auto sink = chain.add_sink<sample>("sink", [](const sample&) {});
  chain.connect(src.out(), a.in());
  chain.connect(a.out(), b.in());
  chain.connect(b.out(), sink.in());
  EXPECT_EQ(chain.dry_run().one_io_thread_reason, "");
}
