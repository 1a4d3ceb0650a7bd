// Graph validation and planning (placement, fusion, link kinds, budgets) against topologies the
// test describes: no OpenCL platform is needed, and ctest runs this with none.

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "planner_fixture.hpp"

#include <gtest/gtest.h>

#include <optional>

using namespace ringpipe;
using namespace ringpipe::testing;

namespace {

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

TEST_F(PlannerTest, DefaultRingsOfBigMessagesStayNearFourMebibytes) {
  struct megabyte {
    std::byte bytes[1 << 20];
  };
  struct page {
    std::byte bytes[4096];
  };
  for (const auto objective : {pipeline_objective::latency, pipeline_objective::throughput}) {
    auto o = opts("big");
    o.objective = objective;
    pipeline p(rt, o);
    auto a = p.add_source<megabyte>("a", []() -> std::optional<megabyte> { return std::nullopt; });
    auto b = p.add_sink<megabyte>("b", [](const megabyte&) {});
    auto c = p.add_source<page>("c", []() -> std::optional<page> { return std::nullopt; });
    auto d = p.add_sink<page>("d", [](const page&) {});
    p.connect(a.out(), b.in());
    p.connect(c.out(), d.in());
    const auto links = p.dry_run().links;
    ASSERT_EQ(links.size(), 2u);
    EXPECT_EQ(links[0].capacity, 4u) << to_string(objective) << ": 1 MiB messages (not 1,024 slots: 1 GiB)";
    EXPECT_GE(links[1].capacity, 256u) << to_string(objective) << ": 4 KiB messages keep their rings";
    EXPECT_LE(std::size_t{links[1].capacity} * sizeof(page), std::size_t{4} << 20) << to_string(objective);
  }
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

TEST_F(PlannerTest, AutomaticPlacementSpreadsAChainOverDevicesWithDirectLinks) {
  // PoCL x2 + rusticl: four kernels that name no device go to the two PoCL devices (shared
  // memory between them), spread over both; none to rusticl, whose links would be staged.
  pipeline p(rt, opts("chain", false));
  auto src = p.add_source<sample>("src", no_messages());
  std::vector<stage_ref<sample, sample>> ks;
  ks.reserve(4);
  for (int k = 0; k < 4; ++k)
    ks.push_back(p.add_kernel<sample, sample>("k" + std::to_string(k), map_kernel("twice")));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), ks[0].in());
  for (int k = 0; k + 1 < 4; ++k)
    p.connect(ks[k].out(), ks[k + 1].in());
  p.connect(ks[3].out(), sink.in());
  const auto plan = p.dry_run();
  std::vector<int> on(3);
  for (int k = 0; k < 4; ++k)
    ++on[*plan.find_stage("k" + std::to_string(k))->device];
  EXPECT_EQ(on, (std::vector<int>{2, 2, 0})) << plan.text();
  EXPECT_EQ(plan.staged_links(), 0u) << plan.text();
  ASSERT_EQ(plan.device_groups.size(), 1u) << plan.text();
  EXPECT_EQ(plan.device_groups[0], (std::vector<std::size_t>{0, 1}));
  EXPECT_NE(plan.text().find("device groups (direct links within a group): {0, 1}"), std::string::npos);
  EXPECT_NE(plan.text().find("0 of 5 links copy their messages through host memory"), std::string::npos);
}

TEST(Placement, AKernelGoesWhereItsNeighboursDataIsDirectlyReachable) {
  // Two platforms with shared memory each and free workers each, but none between them: a kernel
  // that talks to one placed on the first platform stays there rather than spread to the other,
  // where its link would be staged. Fewest-kernels alone would put it on the other.
  runtime rt{describe({pocl_cpu("cpu0"), {"Other SVM platform", "other", true, 2, "other", device_type::cpu}}),
             two_cores()};
  pipeline p(rt, opts("neighbours", false));
  auto src = p.add_source<sample>("src", no_messages());
  auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"));
  auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), a.in());
  p.connect(a.out(), b.in());
  p.connect(b.out(), sink.in());
  const auto plan = p.dry_run();
  EXPECT_EQ(plan.find_stage("a")->device, 0u);
  EXPECT_EQ(plan.find_stage("b")->device, 0u) << plan.text();
  EXPECT_EQ(plan.find_link("a.out", "b.in")->kind, link_kind::direct);
  // Placed by hand on the two platforms: two groups, and the link between them staged.
  pipeline apart(rt, opts("apart", false));
  auto src2 = apart.add_source<sample>("src", no_messages());
  auto a2 = apart.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(0));
  auto b2 = apart.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(1));
  auto sink2 = apart.add_sink<sample>("sink", [](const sample&) {});
  apart.connect(src2.out(), a2.in());
  apart.connect(a2.out(), b2.in());
  apart.connect(b2.out(), sink2.in());
  const auto split = apart.dry_run();
  EXPECT_EQ(split.device_groups.size(), 2u) << split.text();
  EXPECT_EQ(split.staged_links(), 1u) << split.text();
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

TEST_F(PlannerTest, KernelStageOnARuntimeWithoutDevicesIsRefusedNamingTheStage) {
  runtime host_only(topology::from_devices({}));
  pipeline p(host_only, opts("no devices"));
  auto src = p.add_source<sample>("src", no_messages());
  auto k = p.add_kernel<sample, sample>("k", map_kernel("twice"));
  auto sink = p.add_sink<sample>("sink", [](const sample&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  expect_error([&] { (void)p.dry_run(); }, make_error_code(errc::invalid_pipeline),
               {"stage 'k' is a kernel stage, but the runtime has no device"},
               "kernel stage without a device accepted");
}

} // namespace
