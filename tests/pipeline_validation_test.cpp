// Pipelines refused before anything launches: a cycle, mismatched types, a kernel declared for
// other sizes, dangling ports, a forced direct link without shared memory, forced persistent
// kernels beyond the budget. (Part of pipeline_failure_test, one binary.)
#include <ringpipe/occupancy.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::counting_source;
using ringpipe::testing::host_step;
using ringpipe::testing::is_pocl;
using ringpipe::testing::is_rusticl;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;

TEST_F(PipelineTest, CycleIsRefusedNamingItsPorts) {
  pipeline p(rt(), {"cyclic"});
  auto src = p.add_source<msg>("source", counting_source(10));
  auto a = p.add_host<msg, msg>("a", host_step);
  auto b = p.add_host<msg, msg>("b", host_step);
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), a.in());
  p.connect(a.out(), b.in());
  p.connect(b.out(), a.in());
  p.connect(b.out(), sink.in());
  try {
    p.start();
    FAIL() << "a cyclic pipeline started";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::invalid_pipeline));
    const std::string what = e.what();
    EXPECT_NE(what.find("has a cycle"), std::string::npos) << what;
    EXPECT_NE(what.find("a.out -> b.in"), std::string::npos) << what;
    EXPECT_NE(what.find("b.out -> a.in"), std::string::npos) << what;
  }
}

TEST_F(PipelineTest, AnInletsRingAskedForBeforeStartIsRefusedNamingIt) {
  pipeline p(rt(), {"early"});
  auto in = p.add_inlet<msg>("feed");
  auto out = p.add_outlet<msg>("drain");
  p.connect(in.out(), out.in());
  for (const bool inlet : {true, false}) {
    try {
      (void)(inlet ? p.inlet<msg>("feed") : p.outlet<msg>("drain"));
      FAIL() << "a ring handed out before start()";
    } catch (const ringpipe::error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::invalid_pipeline));
      EXPECT_NE(std::string(e.what()).find(inlet ? "pipeline 'early': the ring of inlet 'feed' exists after start()"
                                                 : "pipeline 'early': the ring of outlet 'drain' exists after start()"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(PipelineTest, MismatchedTypesAreRefusedNamingBothPorts) {
  pipeline p(rt(), {"types"});
  p.add_source<test_message<16>>("small", counting_source(10));
  p.add_sink<test_message<64>>("big", [](const test_message<64>&) {});
  try {
    p.connect("small", "big");
    FAIL() << "connected 16-byte messages to a 64-byte port";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
    const std::string what = e.what();
    EXPECT_NE(what.find("'small.out' (test_message<16> (16 bytes))"), std::string::npos) << what;
    EXPECT_NE(what.find("'big.in' (test_message<64> (64 bytes))"), std::string::npos) << what;
  }
}

TEST_F(PipelineTest, KernelDeclaredForOtherSizesIsRefusedBeforeLaunch) {
  pipeline p(rt(), {"kernel-size"});
  auto src = p.add_source<test_message<32>>("source", [] { return std::optional<test_message<32>>(); });
  auto k = p.add_kernel<test_message<32>, test_message<32>>("map16", test_kernel("test_map")); // built for 16
  auto sink = p.add_sink<test_message<32>>("sink", [](const test_message<32>&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  try {
    p.start();
    FAIL() << "a kernel built for 16-byte messages took 32-byte ones";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
    const std::string what = e.what();
    EXPECT_NE(what.find("stage 'map16'"), std::string::npos) << what;
    EXPECT_NE(what.find("16-byte messages"), std::string::npos) << what;
    EXPECT_NE(what.find("32-byte messages"), std::string::npos) << what;
  }
}

TEST_F(PipelineTest, DanglingPortsAreRefusedByName) {
  pipeline p(rt(), {"dangling"});
  auto src = p.add_source<msg>("source", counting_source(10));
  auto h = p.add_host<msg, msg>("orphan", host_step);
  p.add_sink<msg>("lonely", [](const msg&) {});
  p.connect(src.out(), h.in());
  try {
    p.start();
    FAIL() << "a pipeline with unconnected ports started";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::invalid_pipeline));
    const std::string what = e.what();
    EXPECT_NE(what.find("output port 'orphan.out' is not connected"), std::string::npos) << what;
    EXPECT_NE(what.find("input port 'lonely.in' is not connected"), std::string::npos) << what;
  }
}

TEST_F(PipelineTest, ForcedDirectLinkWithoutSharedMemoryIsRefused) {
  const auto rusticl = ringpipe::testing::find_device(topo(), is_rusticl);
  const auto pocl = ringpipe::testing::find_device(topo(), is_pocl);
  RINGPIPE_REQUIRE_DEVICE(rusticl && pocl, "PoCL and rusticl device pair");
  pipeline p(rt(), {"no-direct"});
  auto src = p.add_source<msg>("source", counting_source(10));
  auto a = p.add_kernel<msg, msg>("on_pocl", test_kernel("test_map"), on_device(*pocl));
  auto b = p.add_kernel<msg, msg>("on_rusticl", test_kernel("test_map"), on_device(*rusticl));
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), a.in());
  p.connect(a.out(), b.in(), {link_kind::direct, 0});
  p.connect(b.out(), sink.in());
  try {
    p.start();
    FAIL() << "a direct link between PoCL and rusticl was accepted";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::invalid_pipeline));
    EXPECT_NE(std::string(e.what()).find("on_pocl.out -> on_rusticl.in cannot be direct"), std::string::npos)
        << e.what();
  }
}

TEST_F(PipelineTest, ForcedPersistentKernelsBeyondTheBudgetAreRefusedBeforeLaunch) {
  const auto pocl = ringpipe::testing::find_device(topo(), is_pocl);
  RINGPIPE_REQUIRE_DEVICE(pocl, "PoCL device");
  const auto budget = topo()[*pocl].budget().budget();
  pipeline_options options;
  options.name = "over-budget";
  options.fuse_kernels = false; // fused, the chain would be one kernel
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counting_source(10));
  output_port<msg> prev = src.out();
  kernel_options persistent;
  persistent.mode = kernel_mode::persistent;
  for (std::uint32_t i = 0; i <= budget; ++i) {
    auto k = p.add_kernel<msg, msg>("k" + std::to_string(i), test_kernel("test_map"), on_device(*pocl), persistent);
    p.connect(prev, k.in());
    prev = k.out();
  }
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(prev, sink.in());
  try {
    p.start();
    FAIL() << budget + 1 << " forced persistent kernels started on a budget of " << budget;
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::budget_exceeded));
    const std::string what = e.what();
    EXPECT_NE(what.find("forces " + std::to_string(budget + 1) + " persistent kernels"), std::string::npos) << what;
    EXPECT_NE(what.find("'k0'"), std::string::npos) << what;
  }
  EXPECT_EQ(topo()[*pocl].budget().in_use(), 0u) << "nothing was launched";
}

} // namespace
