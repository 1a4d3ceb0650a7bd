// Pipelines that work: chains of host and kernel stages over every device of the environment,
// kernel to kernel across devices, fusion, fan-out and fan-in, inlets and outlets, and repeated
// build-run-stop cycles; every message exactly once, in order.
#include <ringpipe/pipeline.hpp>

#include <ringpipe/occupancy.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"
#include "wait_for.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

using ringpipe::testing::checker;
using ringpipe::testing::counting_source;
using ringpipe::testing::host_step;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;
using ringpipe::testing::wait_for;

namespace {

using msg = test_message<16>;

// ---- chains of host and kernel stages over every device of the environment ----

struct chain_case {
  int stages;
  std::uint32_t capacity;
  std::optional<link_kind> kind; // forced on kernel-to-kernel connections
  std::uint32_t count;
};

std::string chain_name(const ::testing::TestParamInfo<chain_case>& p) {
  return std::to_string(p.param.stages) + "stages_capacity" +
         (p.param.capacity == 0 ? std::string("_default") : std::to_string(p.param.capacity)) +
         (p.param.kind ? "_" + std::string(to_string(*p.param.kind)) : std::string("_auto"));
}

class PipelineChains : public PipelineTest, public ::testing::WithParamInterface<chain_case> {};

// source -> s1 -> ... -> sN -> sink. Odd stages run on the host, even ones are test_map kernels
// placed on the devices in turn, so consecutive kernels (stages 2 and 4, with a host stage
// between) and kernel->host->kernel hops cross devices. With a forced kind, every stage is a
// kernel, so the forced links join kernels on alternating devices.
TEST_P(PipelineChains, EveryMessageArrivesOnceInOrder) {
  const auto& c = GetParam();
  const auto ndev = topo().size();
  const bool all_kernels = c.kind.has_value();
  const bool slow_device = std::any_of(topo().devices().begin(), topo().devices().end(),
                                       [](const device& d) { return !d.info().svm.fine_buffer; });
  // Devices without shared memory launch a batch per message at capacity 1 (~0.7 ms each).
  const std::uint32_t count = slow_device && c.capacity == 1 ? std::min<std::uint32_t>(c.count, 3000) : c.count;
  if (c.kind == link_kind::direct && slow_device)
    GTEST_SKIP() << "direct links need devices that share fine-grained SVM; this environment has one without";

  pipeline_options options;
  options.capacity = c.capacity; // set: latency; 0: automatic chooses (throughput on 2 cores)
  options.name = "chain";
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counting_source(count));
  output_port<msg> prev = src.out();
  int hops = 0;
  std::size_t kernel_index = 0;
  for (int i = 1; i <= c.stages; ++i) {
    const bool kernel = all_kernels || i % 2 == 0;
    const std::string name = "s" + std::to_string(i);
    link_options link;
    if (kernel) {
      auto k = p.add_kernel<msg, msg>(name, test_kernel("test_map"), on_device(kernel_index++ % ndev));
      if (all_kernels && i > 1) link.kind = c.kind;
      p.connect(prev, k.in(), link);
      prev = k.out();
    } else {
      auto h = p.add_host<msg, msg>(name, host_step);
      p.connect(prev, h.in());
      prev = h.out();
    }
    ++hops;
  }
  checker check;
  check.hops = hops;
  auto sink = p.add_sink<msg>("sink", std::ref(check));
  p.connect(prev, sink.in());
  p.run(5min);

  EXPECT_EQ(check.errors, 0u) << check.first_error;
  EXPECT_EQ(check.expected, count) << "messages lost at the end";
  const auto m = p.metrics();
  for (const auto& l : m.links) {
    EXPECT_EQ(l.messages, count) << l.from << " -> " << l.to;
    if (c.kind && l.forced) {
      EXPECT_EQ(l.kind, *c.kind) << l.from << " -> " << l.to;
    }
  }
  // Kernels the planner parks (their pool cannot keep them all resident) ran parked.
  const auto planned = p.dry_run();
  for (const auto& sm : m.stages) {
    const auto* ps = planned.find_stage(sm.name);
    if (ps != nullptr && ps->mode == kernel_mode::parked && ps->mode_from_objective) {
      EXPECT_EQ(sm.mode, "parked") << sm.name << "\n" << planned.parking_reason;
    }
  }
  RecordProperty("plan", p.plan());
  if (std::getenv("RINGPIPE_TEST_VERBOSE")) std::printf("%s\n%s", p.plan().c_str(), m.table().c_str());
}

// Capacity 1 makes every message a handshake between all the pipeline's threads; with more
// spinning threads than the 2 cores of CI (two kernels and the runtime's threads), each handshake
// waits for the scheduler (~0.2 ms), so the long capacity-1 chains carry fewer messages.
INSTANTIATE_TEST_SUITE_P(Mixed, PipelineChains,
                         ::testing::Values(chain_case{1, 1024, {}, 100000}, chain_case{2, 1024, {}, 100000},
                                           chain_case{4, 1024, {}, 100000}, chain_case{8, 1024, {}, 100000},
                                           chain_case{1, 1, {}, 100000}, chain_case{2, 1, {}, 100000},
                                           chain_case{4, 1, {}, 20000}, chain_case{8, 1, {}, 10000}),
                         chain_name);
INSTANTIATE_TEST_SUITE_P(DefaultCapacity, PipelineChains,
                         ::testing::Values(chain_case{2, 0, {}, 100000}, chain_case{4, 0, {}, 100000},
                                           chain_case{8, 0, {}, 100000}),
                         chain_name);
INSTANTIATE_TEST_SUITE_P(Forced, PipelineChains,
                         ::testing::Values(chain_case{2, 1024, link_kind::direct, 100000},
                                           chain_case{2, 1024, link_kind::staged, 100000},
                                           chain_case{4, 1, link_kind::staged, 10000},
                                           chain_case{4, 1, link_kind::direct, 10000}),
                         chain_name);

// ---- kernel source to kernel sink across two devices, as the demo runs it ----

class KernelToKernel : public PipelineTest, public ::testing::WithParamInterface<link_kind> {};

TEST_P(KernelToKernel, SummaryCountsEveryMessage) {
  const auto ndev = topo().size();
  const bool shared = std::all_of(topo().devices().begin(), topo().devices().end(),
                                  [](const device& d) { return d.info().svm.fine_buffer && d.info().svm.atomics; });
  if (GetParam() == link_kind::direct && !(shared && topo()[0].shares_context_with(topo()[ndev - 1])))
    GTEST_SKIP() << "direct links need devices in one context with fine-grained SVM";
  constexpr std::uint32_t count = 200000;
  pipeline p(rt(), {"k2k"});
  auto spec = test_kernel("test_source");
  spec.args = {kernel_arg::of(count)};
  auto verify = test_kernel("test_verify");
  verify.state_bytes = sizeof(test_summary);
  verify.args = {kernel_arg::of(std::uint32_t{0})};
  auto producer = p.add_kernel<no_message, msg>("producer", spec, on_device(0));
  auto consumer = p.add_kernel<msg, test_summary>("consumer", verify, on_device(ndev - 1));
  std::vector<test_summary> got;
  auto sink = p.add_sink<test_summary>("summary", [&](const test_summary& s) { got.push_back(s); });
  p.connect(producer.out(), consumer.in(), {GetParam(), 0});
  p.connect(consumer.out(), sink.in());
  p.run(5min);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].count, count);
  EXPECT_EQ(got[0].errors, 0u) << "first error at seq " << got[0].first_error;
  EXPECT_EQ(got[0].sum, test_checksum(count, 0));
  const auto m = p.metrics();
  EXPECT_EQ(m.links[0].kind, GetParam());
  EXPECT_EQ(m.links[0].messages, count);
  EXPECT_EQ(m.direct_links + m.staged_links, 2u);
  EXPECT_GE(GetParam() == link_kind::direct ? m.direct_links : m.staged_links, 1u);
}

INSTANTIATE_TEST_SUITE_P(Links, KernelToKernel, ::testing::Values(link_kind::direct, link_kind::staged),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// ---- fusion of adjacent map kernels ----

class KernelFusion : public PipelineTest, public ::testing::WithParamInterface<bool> {};

// source -> map -> filter_even -> map -> sink on one device: fused into one kernel by default,
// three kernels when fusion is off; the same messages either way.
TEST_P(KernelFusion, AdjacentMapKernelsGiveTheSameStream) {
  constexpr std::uint32_t count = 100000;
  pipeline_options options;
  options.name = "fusion";
  options.fuse_kernels = GetParam();
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counting_source(count));
  auto k1 = p.add_kernel<msg, msg>("first", test_kernel("test_map"), on_device(0));
  auto k2 = p.add_kernel<msg, msg>("even", test_kernel("test_filter_even"), on_device(0));
  auto k3 = p.add_kernel<msg, msg>("last", test_kernel("test_map"), on_device(0));
  std::uint32_t expected = 0, errors = 0;
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
    if (m.seq != expected || m.check != test_check_after(m.seq, 3)) ++errors;
    expected = m.seq + 2;
  });
  p.connect(src.out(), k1.in());
  p.connect(k1.out(), k2.in());
  p.connect(k2.out(), k3.in());
  p.connect(k3.out(), sink.in());
  p.run(5min);
  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(expected, count) << "every even message arrived";
  const auto m = p.metrics();
  EXPECT_EQ(m.fused_links, GetParam() ? 2u : 0u) << p.plan();
  if (GetParam()) {
    EXPECT_NE(p.plan().find("fused with 'even', fused with 'last'"), std::string::npos) << p.plan();
    EXPECT_EQ(m.stages[1].msgs_in, count);
    EXPECT_EQ(m.stages[1].msgs_out, count / 2) << "the fused kernel's output is the last stage's";
  }
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, KernelFusion, ::testing::Bool(),
                         [](const auto& p) { return p.param ? std::string("fused") : std::string("separate"); });

// ---- fan-out and fan-in ----

TEST_F(PipelineTest, BroadcastGivesEverySinkEveryMessageInOrder) {
  constexpr std::uint32_t count = 100000;
  pipeline p(rt(), {"broadcast"});
  auto src = p.add_source<msg>("source", counting_source(count));
  auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
  checker a, b;
  a.hops = b.hops = 1;
  auto sa = p.add_sink<msg>("a", std::ref(a));
  auto sb = p.add_sink<msg>("b", std::ref(b));
  p.connect(src.out(), k.in());
  p.connect(k.out(), sa.in()); // a kernel with two outputs: the runtime splits through a mover
  p.connect(k.out(), sb.in());
  p.set_fan_out("map", fan_out::broadcast);
  p.run(5min);
  EXPECT_EQ(a.errors, 0u) << a.first_error;
  EXPECT_EQ(b.errors, 0u) << b.first_error;
  EXPECT_EQ(a.expected, count);
  EXPECT_EQ(b.expected, count);
}

// Round robin out of a source, through a kernel and a host stage, merged into a kernel and a sink:
// every message exactly once, in order per path.
TEST_F(PipelineTest, RoundRobinAndMergeKeepOrderPerPath) {
  constexpr std::uint32_t count = 100000;
  pipeline p(rt(), {"fan"});
  auto src = p.add_source<msg>("source", counting_source(count));
  auto left = p.add_kernel<msg, msg>("left", test_kernel("test_map"));
  auto right = p.add_host<msg, msg>("right", host_step);
  auto join = p.add_kernel<msg, msg>("join", test_kernel("test_map"));
  std::vector<std::uint32_t> seen(count, 0);
  std::uint32_t last_even = 0, last_odd = 0, order_errors = 0, check_errors = 0;
  bool first_even = true, first_odd = true;
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
    if (m.seq >= count) return ++order_errors, void();
    ++seen[m.seq];
    if (m.check != test_check_after(m.seq, 2)) ++check_errors;
    // Round robin from one source: even sequence numbers took one path, odd ones the other.
    auto& last = m.seq % 2 ? last_odd : last_even;
    auto& first = m.seq % 2 ? first_odd : first_even;
    if (!first && m.seq != last + 2) ++order_errors;
    first = false;
    last = m.seq;
  });
  p.connect(src.out(), left.in());
  p.connect(src.out(), right.in());
  p.set_fan_out("source", fan_out::round_robin);
  p.connect(left.out(), join.in()); // a kernel with two inputs: the runtime merges through a mover
  p.connect(right.out(), join.in());
  p.connect(join.out(), sink.in());
  p.run(5min);
  EXPECT_EQ(order_errors, 0u);
  EXPECT_EQ(check_errors, 0u);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1u), static_cast<long>(count)) << "each message exactly once";
}

// ---- inlets, outlets, metrics ----

TEST_F(PipelineTest, InletAndOutletCarryApplicationMessages) {
  pipeline p(rt(), {"ports"});
  auto in = p.add_inlet<msg>("in");
  auto k1 = p.add_kernel<msg, msg>("k1", test_kernel("test_map"));
  auto k2 = p.add_kernel<msg, msg>("k2", test_kernel("test_map"));
  auto out = p.add_outlet<msg>("out");
  p.connect(in.out(), k1.in());
  p.connect(k1.out(), k2.in());
  p.connect(k2.out(), out.in());
  p.start();
  auto push = p.inlet<msg>("in");
  auto pop = p.outlet<msg>("out");
  EXPECT_THROW((void)p.outlet<test_message<32>>("out"), ringpipe::error);
  checker check;
  check.hops = 2;
  for (std::uint32_t s = 0; s < 10000; ++s) {
    push.push(make_test_message<16>(s), 10s);
    msg m;
    while (pop.try_pop(m))
      check(m);
  }
  push.close();
  msg m;
  while (pop.pop(m, 20s))
    check(m);
  p.wait(20s);
  EXPECT_EQ(check.errors, 0u) << check.first_error;
  EXPECT_EQ(check.expected, 10000u);
  const auto metrics = p.metrics();
  EXPECT_NE(metrics.table().find("k2"), std::string::npos);
  const auto json = metrics.json();
  EXPECT_NE(json.find("\"name\": \"k1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"messages\": 10000"), std::string::npos) << json;
}

TEST_F(PipelineTest, RunOnDeviceRunsInOrderAndCarriesExceptions) {
  const auto& dev = topo()[0];
  std::vector<int> order;
  std::vector<std::future<int>> results;
  results.reserve(100);
  for (int i = 0; i < 100; ++i)
    results.push_back(rt().run_on_device(dev, [&order, i] {
      order.push_back(i); // a strand: no two run at once
      return i * 2;
    }));
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(results[static_cast<std::size_t>(i)].get(), i * 2);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  auto failing = rt().run_on_device(dev, []() -> int { throw std::runtime_error("device busy"); });
  EXPECT_THROW(failing.get(), std::runtime_error);
}

// A host function that waits for run_on_device on a runtime of one io thread: the device's strand
// runs the task on a stand-in (runtime::task_stand_in); without it the wait never ended, no io
// thread being free to run the task.
TEST_F(PipelineTest, AHostFunctionWaitsForRunOnDeviceOnARuntimeOfOneThread) {
  runtime_options o;
  o.threads = 1;
  runtime one(topo(), o);
  const auto& dev = one.device_at(0);
  std::uint32_t ready = 0, sum = 0;
  pipeline p(one, {"waits-for-its-device"});
  auto src = p.add_source<msg>("source", counting_source(3));
  auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
    auto f = one.run_on_device(dev, [seq = m.seq] { return seq + 1; });
    if (f.wait_for(10s) != std::future_status::ready) return;
    ++ready;
    sum += f.get();
  });
  p.connect(src.out(), sink.in());
  p.run(60s);
  EXPECT_EQ(ready, 3u) << "a task on the device's strand waited for the io thread waiting for it";
  EXPECT_EQ(sum, 1u + 2u + 3u);
  for (int i = 0; i < 1000 && one.threads() != 1; ++i)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(one.threads(), 1u) << "the stand-in still runs after the task";
}

// ---- repeated build, run and stop ----

TEST_F(PipelineTest, TwoHundredCyclesOfBuildRunStopLeaveNothingBehind) {
  for (int cycle = 0; cycle < 200; ++cycle) {
    pipeline p(rt(), {"cycle"});
    auto src = p.add_source<msg>("source", counting_source(200));
    auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"));
    checker check;
    check.hops = 1;
    auto sink = p.add_sink<msg>("sink", std::ref(check));
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
    if (cycle % 2 == 0) {
      p.run(60s);
      ASSERT_EQ(check.expected, 200u) << "cycle " << cycle;
    } else {
      p.start();
      p.stop(); // stopped while running: nothing hangs
    }
  }
  // A kernel given up on by a stop (give_up_after: under AddressSanitizer a launch that had just
  // begun sometimes took longer) holds its worker until its launch returns, and then gives it back.
  for (const auto& d : topo().devices()) {
    EXPECT_TRUE(wait_for([&] { return d.budget().in_use() == 0; }, 10s)) << "a worker is still held on " << d.label();
  }
}

} // namespace
