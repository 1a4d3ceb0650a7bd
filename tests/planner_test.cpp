// Graph validation and planning (placement, fusion, link kinds, budgets) against topologies the
// test describes: no OpenCL platform is needed, and ctest runs this with none.

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "support/described_topology.hpp"

#include <gtest/gtest.h>

#include <optional>

using namespace ringpipe;
using ringpipe::testing::describe;
using ringpipe::testing::expect_error;

struct sample {
  std::uint32_t seq;
  float value;
};
struct wide {
  std::uint64_t a, b;
};

namespace {

// A program the planner reads (for RINGPIPE_MAP_KERNEL declarations) but nothing compiles.
const char* const map_program = "RINGPIPE_MAP_KERNEL(twice, sample, sample, twice_fn)\n"
                                "RINGPIPE_MAP_KERNEL(clip, sample, sample, clip_fn)\n";
kernel_spec map_kernel(const char* name) { return {map_program, name}; }

pipeline_options opts(const char* name, bool fuse = true, std::shared_ptr<const placement_policy> policy = {}) {
  pipeline_options o;
  o.name = name;
  o.fuse_kernels = fuse;
  o.placement = std::move(policy);
  return o;
}
link_options forced(link_kind kind) {
  link_options o;
  o.kind = kind;
  return o;
}

auto no_messages() {
  return []() -> std::optional<sample> { return std::nullopt; };
}

// PoCL x2 (one context, shared SVM, one pool of 2 workers) and rusticl (no SVM): the CI machines.
topology ci_topology() {
  return describe(
      {ringpipe::testing::pocl_cpu("cpu0"), ringpipe::testing::pocl_cpu("cpu1"), ringpipe::testing::rusticl_cpu()});
}

// One runtime thread and the CI machine's 2 cores, whatever this host has.
runtime_options two_cores() {
  runtime_options o;
  o.threads = 1;
  o.host_cores = 2;
  return o;
}

class PlannerTest : public ::testing::Test {
protected:
  runtime rt{ci_topology(), two_cores()};
};

TEST(NoPlatform, ThisBinaryRunsWithoutAnyOpenCLPlatform) {
  if (std::getenv("OCL_ICD_VENDORS") == nullptr) GTEST_SKIP() << "run by ctest with an empty OCL_ICD_VENDORS";
  expect_error([] { (void)topology::discover(); }, make_error_code(errc::no_platform), {"no OpenCL platform"},
               "an OpenCL platform was found: this test is meant to need none");
}

TEST_F(PlannerTest, LinkKindPerDevicePairIsTheTopologysAndMoversOnlyBetweenDevices) {
  const auto& topo = rt.devices();
  for (std::size_t from = 0; from < topo.size(); ++from) {
    for (std::size_t to = 0; to < topo.size(); ++to) {
      pipeline p(rt, opts("pair", false));
      auto src = p.add_source<sample>("src", no_messages());
      auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(from));
      auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(to));
      auto sink = p.add_sink<sample>("sink", [](const sample&) {});
      p.connect(src.out(), a.in());
      p.connect(a.out(), b.in());
      p.connect(b.out(), sink.in());
      const auto plan = p.dry_run();
      const auto* link = plan.find_link("a.out", "b.in");
      ASSERT_NE(link, nullptr);
      EXPECT_EQ(link->kind, topo.link(from, to)) << from << " -> " << to;
      const bool svm_pair = from < 2 && to < 2;
      EXPECT_EQ(link->kind, svm_pair ? link_kind::direct : link_kind::staged) << from << " -> " << to;
      EXPECT_EQ(link->mover, !svm_pair && from != to) << "a mover only between devices that share no ring";
      // Host ends: direct into shared memory, staged (the kernel copies batches) into rusticl.
      EXPECT_EQ(plan.find_link("src.out", "a.in")->kind, from < 2 ? link_kind::direct : link_kind::staged);
      EXPECT_FALSE(plan.find_link("src.out", "a.in")->mover);
    }
  }
}

TEST_F(PlannerTest, ForcedStagedGoesThroughAMoverAndForcedDirectWithoutSvmIsRefused) {
  pipeline p(rt, opts("forced"));
  auto src = p.add_source<sample>("src", no_messages());
  auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), a.in(), forced(link_kind::staged));
  p.connect(a.out(), sink.in());
  const auto plan = p.dry_run();
  EXPECT_EQ(plan.find_link("src.out", "a.in")->kind, link_kind::staged);
  EXPECT_TRUE(plan.find_link("src.out", "a.in")->mover);
  EXPECT_TRUE(plan.find_link("src.out", "a.in")->forced);

  pipeline q(rt, opts("forced-direct"));
  auto s2 = q.add_source<sample>("src", no_messages());
  auto k = q.add_kernel<sample, sample>("k", map_kernel("twice"), on_device(2));
  auto t2 = q.add_sink<sample>("sink", [](const sample&) {});
  q.connect(s2.out(), k.in(), forced(link_kind::direct));
  q.connect(k.out(), t2.in());
  expect_error([&] { (void)q.dry_run(); }, make_error_code(errc::invalid_pipeline),
               {"connection src.out -> k.in cannot be direct", "rusticl: llvmpipe"}, "forced direct link accepted");
}

TEST_F(PlannerTest, AdjacentMapKernelsOnOneDeviceFuseAndOthersDoNot) {
  auto build = [&](pipeline& p, std::size_t second_device, link_options middle) {
    auto src = p.add_source<sample>("src", no_messages());
    auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
    auto b = p.add_kernel<sample, sample>("b", map_kernel("clip"), on_device(second_device));
    auto sink = p.add_sink<sample>("sink", [](const sample&) {});
    p.connect(src.out(), a.in());
    p.connect(a.out(), b.in(), middle);
    p.connect(b.out(), sink.in());
  };
  pipeline same(rt, opts("same"));
  build(same, 0, {});
  auto plan = same.dry_run();
  EXPECT_EQ(plan.find_link("a.out", "b.in")->kind, link_kind::fused);
  EXPECT_EQ(plan.find_stage("b")->fused_into, "a");
  EXPECT_EQ(plan.find_stage("a")->fused_with, std::vector<std::string>{"b"});
  EXPECT_EQ(plan.find_link("b.out", "sink.in")->kind, link_kind::direct);

  pipeline other(rt, opts("other"));
  build(other, 1, {});
  EXPECT_EQ(other.dry_run().find_link("a.out", "b.in")->kind, link_kind::direct) << "different devices";

  pipeline kept(rt, opts("kept"));
  build(kept, 0, forced(link_kind::direct));
  EXPECT_EQ(kept.dry_run().find_link("a.out", "b.in")->kind, link_kind::direct) << "a forced link is kept";

  pipeline off(rt, opts("off", false));
  build(off, 0, {});
  EXPECT_EQ(off.dry_run().find_link("a.out", "b.in")->kind, link_kind::direct) << "fusion turned off";
}

TEST_F(PlannerTest, ForcedPersistentKernelsBeyondThePoolsBudgetAreRefused) {
  pipeline p(rt, opts("greedy", false));
  auto src = p.add_source<sample>("src", no_messages());
  kernel_options persistent;
  persistent.mode = kernel_mode::persistent;
  auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0), persistent);
  auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(1), persistent);
  auto c = p.add_kernel<sample, sample>("c", map_kernel("twice"), on_device(0), persistent);
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), a.in());
  p.connect(a.out(), b.in());
  p.connect(b.out(), c.in());
  p.connect(c.out(), sink.in());
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::budget_exceeded),
               {"pipeline 'greedy' forces 3 persistent kernels ('a', 'b', 'c') onto pool 'pocl', which has 2 free"},
               "three persistent kernels accepted on a pool of two workers");
}

TEST_F(PlannerTest, ForcedModeTheDeviceCannotRunIsRefusedAsUnsupportedNotAsBudget) {
  pipeline p(rt, opts("forced-rusticl"));
  auto src = p.add_source<sample>("src", no_messages());
  kernel_options persistent;
  persistent.mode = kernel_mode::persistent;
  auto k = p.add_kernel<sample, sample>("k", map_kernel("twice"), on_device(2), persistent);
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::unsupported_mode),
               {"pipeline 'forced-rusticl': stage 'k' is forced to run persistent on #2 rusticl: llvmpipe, which "
                "runs only batched"},
               "persistent kernel accepted on a device without SVM");
}

TEST_F(PlannerTest, CapacitiesAreCheckedWhereTheyAreGiven) {
  pipeline_options seven = opts("seven");
  seven.capacity = 7;
  expect_error([&] { pipeline p(rt, seven); }, make_error_code(errc::invalid_argument),
               {"pipeline 'seven': pipeline_options::capacity: capacity 7 is not a power of two"},
               "a pipeline with capacity 7 was made");
  pipeline p(rt, opts("odd"));
  auto src = p.add_source<sample>("src", no_messages());
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  link_options three;
  three.capacity = 3;
  expect_error([&] { p.connect(src.out(), sink.in(), three); }, make_error_code(errc::invalid_argument),
               {"pipeline 'odd': connection src.out -> sink.in: capacity 3 is not a power of two"},
               "a connection of capacity 3 was accepted");
  link_options default_capacity; // 0: the pipeline's
  p.connect(src.out(), sink.in(), default_capacity);
  EXPECT_EQ(p.dry_run().links.size(), 1u);
}

struct last_device final : placement_policy {
  std::size_t place(std::string_view, const topology& devices, std::span<const std::uint32_t>) const override {
    return devices.size() - 1;
  }
};

TEST_F(PlannerTest, PlacementIsAPolicyTheApplicationReplaces) {
  auto build = [](pipeline& p) {
    auto src = p.add_source<sample>("src", no_messages());
    auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"));
    auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"));
    auto pinned = p.add_kernel<sample, sample>("pinned", map_kernel("twice"), on_device(1));
    auto sink = p.add_sink<sample>("sink", [](const sample&) {});
    p.connect(src.out(), a.in());
    p.connect(a.out(), b.in());
    p.connect(b.out(), pinned.in());
    p.connect(pinned.out(), sink.in());
  };
  pipeline freest(rt, opts("freest", false));
  build(freest);
  auto plan = freest.dry_run();
  // The PoCL pool has free workers, rusticl none: a and b go to the PoCL devices, one each.
  EXPECT_EQ(plan.find_stage("a")->device, 0u);
  EXPECT_EQ(plan.find_stage("b")->device, 1u);
  EXPECT_EQ(plan.find_stage("pinned")->device, 1u);

  pipeline custom(rt, opts("custom", false, std::make_shared<last_device>()));
  build(custom);
  plan = custom.dry_run();
  EXPECT_EQ(plan.find_stage("a")->device, 2u);
  EXPECT_EQ(plan.find_stage("b")->device, 2u);
  EXPECT_EQ(plan.find_stage("pinned")->device, 1u) << "an explicit device wins over the policy";
  EXPECT_EQ(plan.find_link("a.out", "b.in")->kind, link_kind::staged);
}

TEST_F(PlannerTest, CycleIsRefusedNamingItsPorts) {
  pipeline p(rt, opts("loop"));
  auto src = p.add_source<sample>("src", no_messages());
  auto a = p.add_host<sample, sample>("a", [](const sample& s) { return s; });
  auto b = p.add_host<sample, sample>("b", [](const sample& s) { return s; });
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), a.in());
  p.connect(a.out(), b.in());
  p.connect(b.out(), a.in());
  p.connect(b.out(), sink.in());
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::invalid_pipeline),
               {"pipeline 'loop' has a cycle:\n  a.out -> b.in\n  b.out -> a.in"}, "cycle accepted");
}

TEST_F(PlannerTest, UnconnectedPortsAndOverfedOutletsAreRefusedByName) {
  pipeline p(rt, opts("loose"));
  auto src = p.add_source<sample>("src", no_messages());
  auto mid = p.add_host<sample, sample>("mid", [](const sample& s) { return s; });
  auto out = p.add_outlet<sample>("out");
  auto other = p.add_source<sample>("other", no_messages());
  p.connect(src.out(), out.in());
  p.connect(other.out(), out.in());
  (void)mid;
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::invalid_pipeline),
               {"pipeline 'loose' is not fully connected", "input port 'mid.in' is not connected",
                "output port 'mid.out' is not connected", "outlet 'out' is fed by 2 connections"},
               "loose ports accepted");
}

TEST_F(PlannerTest, MismatchedTypesAreRefusedBeforeAnythingIsPlanned) {
  pipeline p(rt, opts("types"));
  (void)p.add_source<sample>("src", no_messages());
  (void)p.add_sink<wide>("sink", [](const wide&) {});
  expect_error([&] { p.connect("src", "sink"); }, make_error_code(errc::message_size),
               {"cannot connect 'src.out' (sample (8 bytes)) to 'sink.in' (wide (16 bytes))"}, "types accepted");
}

TEST_F(PlannerTest, KernelPlacedOnAMissingDeviceIsRefusedNamingTheStage) {
  pipeline p(rt, opts("far"));
  auto src = p.add_source<sample>("src", no_messages());
  auto k = p.add_kernel<sample, sample>("k", map_kernel("twice"), on_device(7));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::invalid_pipeline),
               {"stage 'k' is placed on device 7 but the runtime has 3 devices"}, "missing device accepted");
}

} // namespace

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
      {"one batched of two", {pocl_cpu("a"), pocl_cpu("b")}, false, 2, true, 2, "latency", "(1 resident kernel on"},
      {"GPU kernels take no host core",
       {gpu_without_svm(), gpu_without_svm()},
       false,
       2,
       false,
       2,
       "latency",
       "(0 resident kernels"},
      {"rusticl kernels are batched anyway",
       {rusticl_cpu()},
       true,
       1,
       false,
       2,
       "latency",
       "2 threads busy under latency fit 2 host cores (0 resident kernels on CPU devices, 2 runtime threads for 2 "
       "host stages)"},
      {"source, PoCL kernel, sink",
       {pocl_cpu()},
       true,
       1,
       false,
       2,
       "throughput",
       "3 threads busy under latency exceed 2 host cores (1 resident kernel on CPU devices, 2 runtime threads for 2 "
       "host stages)"},
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
    EXPECT_EQ(plan.find_stage("k0")->mode_from_objective, throughput && !c.first_batched);
    // Automatic widens rings under either choice: resident kernels hand a backlog to spans.
    EXPECT_EQ(plan.links.front().capacity, 65536u) << "8-byte messages";
  }
}

// A capacity the user fixed keeps latency: batched launches pay off only over wide rings.
TEST_F(PlannerTest, AutomaticKeepsLatencyWhenTheUserFixedTheRingCapacity) {
  for (const std::uint32_t capacity : {0u, 16u, 1024u}) {
    auto o = opts("small-rings", false);
    o.capacity = capacity;
    pipeline p(rt, o);
    auto in = p.add_inlet<sample>("in");
    auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
    auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(1));
    auto out = p.add_outlet<sample>("out");
    p.connect(in.out(), a.in());
    p.connect(a.out(), b.in());
    p.connect(b.out(), out.in());
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

} // namespace
