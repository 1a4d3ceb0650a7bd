// What users look at: the pipeline's Graphviz graph (every stage and link named, grouped by where
// it runs, link kinds and, after a run, what each link carried; Graphviz itself must accept it)
// and the metrics: the callback while it runs, the table's columns.
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

using namespace ringpipe;
using ringpipe::testing::checker;
using ringpipe::testing::counting_source;
using ringpipe::testing::host_step;
using ringpipe::testing::PipelineTest;
using ringpipe::testing::test_kernel;

namespace {

using msg = test_message<16>;

// Renders `text` with Graphviz; the exit code of dot.
int render(const std::string& text, const std::string& name) {
  const std::string in = ::testing::TempDir() + name + ".dot", out = ::testing::TempDir() + name + ".svg";
  std::ofstream(in) << text;
  const std::string command = std::string(RINGPIPE_DOT_PROGRAM) + " -Tsvg " + in + " -o " + out + " 2>&1";
  return std::system(command.c_str());
}

// The line of `table` that holds `what`, without its newline.
std::string row_of(const std::string& table, const char* what) {
  const auto at = table.find(what);
  return table.substr(at, table.find('\n', at) - at);
}

TEST_F(PipelineTest, DotNamesEveryStageAndLinkAndGraphvizDrawsIt) {
  ASSERT_NE(std::string(RINGPIPE_DOT_PROGRAM), "") << "Graphviz's dot was not found at configure time: "
                                                      "scripts/install-deps.sh installs it (graphviz)";
  const std::uint32_t n = 5000;
  pipeline p(rt(), {"drawn \"graph\""}); // a quote in the name: escaped
  auto src = p.add_source<msg>("source", counting_source(n));
  auto k = p.add_kernel<msg, msg>("map", test_kernel("test_map"), on_device(0));
  auto h = p.add_host<msg, msg>("step", host_step);
  checker check;
  check.hops = 2;
  auto sink = p.add_sink<msg>("check", [&](const msg& m) { check(m); });
  p.connect(src.out(), k.in());
  p.connect(k.out(), h.in(), {link_kind::staged});
  p.connect(h.out(), sink.in());
  const auto before = p.dot();
  const std::string device = rt().device_at(0).label();
  for (const char* s : {"\"source\" [", "\"map\" [", "\"step\" [", "\"check\" [", "\"source\" -> \"map\"",
                        "\"map\" -> \"step\"", "\"step\" -> \"check\"", "digraph \"drawn \\\"graph\\\"\"",
                        "label=\"host\"", device.c_str(), "staged (forced)", "shape=box3d"})
    EXPECT_NE(before.find(s), std::string::npos) << "missing " << s << " in\n" << before;
  EXPECT_EQ(before.find(" msgs"), std::string::npos) << "counts before the pipeline ran:\n" << before;
  EXPECT_EQ(render(before, "before"), 0) << before;
  p.run();
  EXPECT_EQ(check.expected, n);
  const auto after = p.dot();
  EXPECT_NE(after.find("5 k msgs, 80 kB"), std::string::npos) << after;
  EXPECT_NE(after.find("5 k in, 5 k out"), std::string::npos) << after;
  EXPECT_EQ(render(after, "after"), 0) << after;
  pipeline one_rank(rt(), {"ranked"}); // split over ranks: this rank's part in a box of its own
  auto a = one_rank.add_source<msg>("a", counting_source(1));
  auto b = one_rank.add_sink<msg>("b", [](const msg&) {});
  one_rank.connect(a.out(), b.in());
  one_rank.set_ranks(0, 1);
  const auto ranked = one_rank.dot();
  EXPECT_NE(ranked.find("rank 0 of 1"), std::string::npos) << ranked;
  EXPECT_NE(ranked.find("subgraph cluster_rank"), std::string::npos) << ranked;
  EXPECT_EQ(render(ranked, "ranked"), 0) << ranked;
}

// The table keeps its columns: a device is its index and name without the platform (every PoCL
// device read "#0 Portable Computing L~"), the column as wide as the longest, and a state wider
// than its column goes under the table.
TEST(MetricsTable, ADevicesNameAndALongStateKeepTheColumns) {
  pipeline_metrics m;
  m.stages.push_back({.name = "square",
                      .kind = stage_kind::kernel,
                      .device = "#1 Portable Computing Language: cpu",
                      .mode = "batched",
                      .state = "running",
                      .msgs_in = 7});
  m.stages.push_back({.name = "shift",
                      .kind = stage_kind::kernel,
                      .device = "#2 rusticl: llvmpipe (LLVM 15.0.6, 256 bits)",
                      .mode = "batched",
                      .state = "fused into 'square'",
                      .msgs_in = 7});
  const std::string t = m.table();
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; (end = t.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(t.substr(at, end - at));
  ASSERT_GE(lines.size(), 4u) << t;
  EXPECT_NE(lines[1].find("#1 cpu "), std::string::npos) << t;
  EXPECT_EQ(lines[1].find("Portable"), std::string::npos) << t;
  EXPECT_EQ(lines[1].size(), lines[2].size()) << "the long state moved the numbers\n" << t;
  EXPECT_NE(lines[2].find("(below)"), std::string::npos) << t;
  EXPECT_NE(lines[2].find("#2 llvmpipe (LLVM 15.0.6, 256 bits) "), std::string::npos) << "cut\n" << t;
  EXPECT_NE(t.find("  shift: fused into 'square'\n"), std::string::npos) << t;
}

// A stage without an input queue (a source) shows "-" for its queue and high-water, not 0/0 and
// 0, and its row keeps the columns of a stage with one.
TEST(MetricsTable, AStageWithoutAQueueShowsNoFill) {
  pipeline_metrics m;
  m.stages.push_back({.name = "produce",
                      .kind = stage_kind::source,
                      .device = "host",
                      .mode = "-",
                      .state = "running",
                      .msgs_out = 9});
  m.stages.push_back({.name = "consume",
                      .kind = stage_kind::sink,
                      .device = "host",
                      .mode = "-",
                      .state = "running",
                      .msgs_in = 9,
                      .queue_fill = 12,
                      .queue_capacity = 64,
                      .queue_high_water = 40});
  const std::string t = m.table();
  const auto row = [&t](const char* name) { return row_of(t, name); };
  EXPECT_EQ(row("produce").size(), row("consume").size()) << t;
  EXPECT_EQ(row("produce").find("0/0"), std::string::npos) << t;
  EXPECT_NE(row("produce").find(" 9             -          -"), std::string::npos) << t;
  EXPECT_NE(row("consume").find("    12/64             40"), std::string::npos) << t;
}

// The links' table too: a rank's port is not cut, and a ring of 131,072 slots keeps the columns.
TEST(MetricsTable, LongPortsAndLargeRingsKeepTheLinksColumns) {
  pipeline_metrics m;
  m.links.push_back({.from = "a.out", .to = "b.in", .messages = 3, .capacity = 64, .high_water = 3});
  m.links.push_back(
      {.from = "scale.out", .to = "sensor_samples->calibrate@rank2.in", .capacity = 262144, .high_water = 131072});
  const std::string t = m.table();
  const auto row = [&t](const char* from) { return row_of(t, from); };
  EXPECT_EQ(row("a.out").size(), row("scale.out").size()) << t;
  EXPECT_NE(row("scale.out").find("sensor_samples->calibrate@rank2.in "), std::string::npos) << t;
  EXPECT_EQ(row("a.out").back(), '4') << "no trailing blanks\n" << t;
}

TEST_F(PipelineTest, MetricsCallbackReportsWhileRunningAndOnceAtTheEnd) {
  const std::uint32_t n = 200;
  std::mutex mutex;
  std::vector<std::uint64_t> seen; // the sink's count at each call
  pipeline_options options{.name = "watched"};
  options.metrics_every = std::chrono::milliseconds(10);
  options.on_metrics = [&](const pipeline_metrics& m) {
    std::lock_guard lock(mutex);
    seen.push_back(m.stage("sink")->msgs_in);
  };
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counting_source(n));
  auto sink = p.add_sink<msg>("sink", [](const msg&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  p.connect(src.out(), sink.in());
  p.run();
  std::size_t calls = 0;
  {
    std::lock_guard lock(mutex);
    calls = seen.size();
    ASSERT_GE(calls, 5u) << "a 200 ms run with a call every 10 ms";
    EXPECT_LT(seen.front(), n) << "the first call came while the pipeline ran";
    EXPECT_EQ(seen.back(), n) << "the last call has the final counts";
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::lock_guard lock(mutex);
  EXPECT_EQ(seen.size(), calls) << "called after wait() returned";
}

TEST_F(PipelineTest, AMetricsCallbackThatThrowsIsSaidOnceAndNotCalledAgain) {
  std::vector<std::string> notices;
  std::mutex mutex;
  runtime_options ro;
  ro.notice = [&](std::string_view text) {
    std::lock_guard lock(mutex);
    notices.emplace_back(text);
  };
  runtime own(topology::discover(), ro);
  std::atomic<int> calls{0};
  pipeline_options options{.name = "throwing"};
  options.metrics_every = std::chrono::milliseconds(5);
  options.on_metrics = [&](const pipeline_metrics&) {
    ++calls;
    throw std::runtime_error("dashboard gone");
  };
  pipeline p(own, options);
  auto src = p.add_source<msg>("source", counting_source(100));
  auto sink = p.add_sink<msg>("sink", [](const msg&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  p.connect(src.out(), sink.in());
  p.run();
  EXPECT_EQ(calls.load(), 1);
  std::lock_guard lock(mutex);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("pipeline 'throwing': its metrics callback threw, and is not called again: dashboard gone"),
            std::string::npos)
      << notices[0];
  pipeline_options zero{.name = "zero"};
  zero.on_metrics = [](const pipeline_metrics&) {};
  zero.metrics_every = std::chrono::milliseconds(0);
  pipeline q(own, zero);
  auto a = q.add_source<msg>("a", counting_source(1));
  auto b = q.add_sink<msg>("b", [](const msg&) {});
  q.connect(a.out(), b.in());
  ringpipe::testing::expect_error([&] { q.start(); }, make_error_code(errc::invalid_argument),
                                  {"pipeline 'zero': metrics_every is 0 ms"}, "a zero interval was accepted");
}

// A host function may ask for the metrics and the plan from its first call, on a runtime thread:
// the pipeline holds its running state before any host function runs (it was assigned after the
// host stages started, a race ThreadSanitizer found when a sink read the metrics at once).
TEST_F(PipelineTest, MetricsAndThePlanAnswerAHostFunctionsFirstCall) {
  pipeline p(rt(), {"asked at once"});
  std::size_t stages_seen = 0;
  std::string plan_seen;
  auto src = p.add_source<msg>("source", [&, next = counting_source(1000), first = true]() mutable {
    if (first) stages_seen = p.metrics().stages.size(), plan_seen = p.plan(), first = false;
    return next();
  });
  checker check;
  auto sink = p.add_sink<msg>("check", [&](const msg& m) { check(m); });
  p.connect(src.out(), sink.in());
  p.run();
  EXPECT_EQ(stages_seen, 2u) << "the first call saw no running pipeline";
  EXPECT_NE(plan_seen.find("source"), std::string::npos) << plan_seen;
  EXPECT_EQ(check.expected, 1000u);
  EXPECT_EQ(check.errors, 0u) << check.first_error;
}

} // namespace
