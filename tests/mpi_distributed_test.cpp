// One pipeline declared on both ranks (mpi::distributed_pipeline), each running its own stages:
// parts placed by rank or shared out by the ranks' devices, a failure on one rank stopping every
// rank, link numbers that serve again, refusals before anything runs. Part of mpi_remote_test
// (the same mpirun -n 2).
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include "mpi_remote_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

using namespace ringpipe;
using namespace std::chrono_literals;
using msg = test_message<16>;
using ringpipe::testing::RemoteLink;

namespace {

// One pipeline declared on both ranks (mpi::distributed_pipeline): source and check on rank 0,
// a kernel and a host step on rank 1; two crossings, joined without naming a link.
struct spread_pipeline {
  pipeline p;
  ringpipe::testing::checker check;
  spread_pipeline(runtime& rt, std::uint32_t count, std::uint32_t fail_at) : p(rt, {"spread"}) {
    check.hops = 2;
    auto src = p.add_source<msg>("source", ringpipe::testing::counting_source(count));
    auto k = p.add_kernel<msg, msg>("map", ringpipe::testing::test_kernel("test_map"));
    auto h = p.add_host<msg, msg>("step", [fail_at](const msg& m) {
      if (m.seq == fail_at) throw std::runtime_error("step cannot take sample " + std::to_string(fail_at));
      return ringpipe::testing::host_step(m);
    });
    auto sink = p.add_sink<msg>("check", [this](const msg& m) { check(m); });
    p.connect(src.out(), k.in());
    p.connect(k.out(), h.in());
    p.connect(h.out(), sink.in());
    p.on_rank(k, 1);
    p.on_rank(h, 1);
  }
};

TEST_F(RemoteLink, OnePipelineDeclaredOnEveryRankRunsItsPartsOnTheirRanks) {
  constexpr std::uint32_t count = 200000;
  spread_pipeline s(rt(), count, count);
  mpi::distributed_pipeline d(w(), s.p);
  d.run(120s);
  ASSERT_EQ(d.links().size(), 2u);
  for (const auto& st : d.link_stats())
    EXPECT_EQ(st.messages, count);
  const auto plan = d.plan();
  EXPECT_NE(plan.find("remote link 8192: source (rank 0) -> map (rank 1)"), std::string::npos) << plan;
  // One graph of both ranks, the same on each: every stage once, in its rank's box, and a bold
  // edge per remote link from one rank's port to the other's.
  const auto graph = d.dot();
  for (const char* want :
       {"over 2 ranks", "\"r0/source\" [", "\"r1/map\" [", "\"r1/step\" [", "\"r0/check\" [", "cluster_r0_rank",
        "cluster_r1_rank",
        "\"r0/source->map@rank1\" -> \"r1/source@rank0->map\" [label=\"remote link 8192\\n200 k msgs\"",
        "\"r1/step->check@rank0\" -> \"r0/step@rank1->check\" [label=\"remote link 8193\\n200 k msgs\""})
    EXPECT_NE(graph.find(want), std::string::npos) << "missing " << want << " in\n" << graph;
  if (const char* out = std::getenv("RINGPIPE_DOT_OUT"); out != nullptr && sender()) std::ofstream(out) << graph;
  if (sender()) {
    EXPECT_EQ(s.check.expected, count) << s.check.first_error;
    EXPECT_EQ(s.check.errors, 0u) << s.check.first_error;
  }
}

TEST_F(RemoteLink, StagesOnAnyRankAreSharedOutByTheRanksDevices) {
  // Two kernels on any_rank, two ranks with a device each: one kernel per rank, the source with
  // the first, the check on rank 0; every rank computes the same placement.
  constexpr std::uint32_t count = 100000;
  pipeline p(rt(), {"anywhere"});
  ringpipe::testing::checker check;
  check.hops = 2;
  auto src = p.add_source<msg>("source", ringpipe::testing::counting_source(count));
  auto first = p.add_kernel<msg, msg>("first", ringpipe::testing::test_kernel("test_map"));
  auto second = p.add_kernel<msg, msg>("second", ringpipe::testing::test_kernel("test_map"));
  auto sink = p.add_sink<msg>("check", [&](const msg& m) { check(m); });
  p.connect(src.out(), first.in());
  p.connect(first.out(), second.in());
  p.connect(second.out(), sink.in());
  p.on_rank(src, any_rank);
  p.on_rank(first, any_rank);
  p.on_rank(second, any_rank);
  mpi::distributed_pipeline d(w(), p);
  EXPECT_EQ(p.rank_of("source"), 0);
  EXPECT_EQ(p.rank_of("first"), 0);
  EXPECT_EQ(p.rank_of("second"), 1);
  d.run(120s);
  ASSERT_EQ(d.links().size(), 2u) << d.plan();
  EXPECT_NE(d.plan().find("first (rank 0) -> second (rank 1)"), std::string::npos) << d.plan();
  if (sender()) {
    EXPECT_EQ(check.expected, count) << check.first_error;
    EXPECT_EQ(check.errors, 0u) << check.first_error;
  }
}

TEST_F(RemoteLink, AStageFailingOnOneRankFailsThePipelineOnEveryRank) {
  spread_pipeline s(rt(), 1000000, 5000);
  mpi::distributed_pipeline d(w(), s.p);
  d.start();
  const auto started = std::chrono::steady_clock::now();
  // Rank 1 fails with the stage's error; rank 0 learns of it through the link rank 1 broke.
  std::vector<std::string> words = {"step cannot take sample 5000"};
  if (sender())
    words.push_back("rank 1 gave up the link");
  else
    words.push_back("stage 'step' failed");
  try {
    d.wait(60s);
    ADD_FAILURE() << "a pipeline whose stage failed finished";
  } catch (const ringpipe::error& e) {
    for (const auto& word : words)
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << "'" << word << "' not in: " << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  if (sender()) {
    EXPECT_LE(s.check.expected, 5000u); // those before the failing one may all arrive
  }
}

TEST_F(RemoteLink, TheSameLinkNumbersServeAgainAfterAFailure) {
  // Frames a failed link left in flight must not reach the next link with its number.
  for (const std::uint32_t fail_at : {300u, 7000u, 60000u}) {
    spread_pipeline failing(rt(), 100000, fail_at);
    mpi::distributed_pipeline d(w(), failing.p);
    d.start();
    EXPECT_THROW(d.wait(60s), ringpipe::error);
  }
  spread_pipeline s(rt(), 50000, 50000);
  mpi::distributed_pipeline d(w(), s.p);
  d.run(60s);
  if (sender()) {
    EXPECT_EQ(s.check.expected, 50000u) << s.check.first_error;
    EXPECT_EQ(s.check.errors, 0u) << s.check.first_error;
  }
}

TEST_F(RemoteLink, APartThatDoesNotStartOnOneRankStopsEveryRankAtOnce) {
  // The kernel placed on rank 1 does not build: rank 1 throws the build error, rank 0 learns it
  // before any link opens, instead of after the links' 30 s of silence.
  pipeline p(rt(), {"unbuildable"});
  auto src = p.add_source<msg>("source", ringpipe::testing::counting_source(10));
  auto k = p.add_kernel<msg, msg>("broken", {"__kernel void broken(__global int* x) { x[0] = ; }", "broken"});
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.on_rank(k, 1);
  mpi::distributed_pipeline d(w(), p);
  const auto started = std::chrono::steady_clock::now();
  try {
    d.start();
    ADD_FAILURE() << "a pipeline whose kernel does not build started";
  } catch (const ringpipe::error& e) {
    const std::string what = e.what();
    if (sender()) {
      EXPECT_EQ(e.code(), make_error_code(errc::remote_failed)) << what;
      EXPECT_NE(what.find("pipeline 'unbuildable' did not start on rank 1"), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("broken"), std::string::npos) << what;
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_TRUE(d.links().empty());
}

TEST_F(RemoteLink, AStageOnARankTheProgramLacksIsRefusedOnEveryRankBeforeAnythingRuns) {
  spread_pipeline s(rt(), 10, 10);
  s.p.on_rank("step", 2);
  mpi::distributed_pipeline d(w(), s.p);
  ringpipe::testing::expect_error([&] { d.start(); }, make_error_code(errc::invalid_pipeline),
                                  {"pipeline 'spread'", "stage 'step' on rank 2"}, "a stage on rank 2 of 2 ran");
  EXPECT_TRUE(d.links().empty());
}

} // namespace
