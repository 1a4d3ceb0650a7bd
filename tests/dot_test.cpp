// The pipeline's Graphviz graph: every stage and link named, grouped by where it runs, link kinds
// and (after a run) what each link carried; Graphviz itself must accept it (dot -Tsvg).
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

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

} // namespace
