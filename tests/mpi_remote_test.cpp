// Remote links between two ranks (run under mpirun -n 2): a stream from a pipeline on rank 0
// through a ring kernel on rank 1, exactly once and in order; credits that bound what is in
// flight behind a slow consumer; message sizes that differ refused on both ranks; a failure on
// rank 0 reaching rank 1 with its reason; one pipeline declared on both ranks, each running its
// own stages (mpi::distributed_pipeline), its failures reaching both.
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/mpi/remote.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

using namespace ringpipe;
using namespace std::chrono_literals;
using msg = test_message<16>;

namespace {

mpi::world* the_world = nullptr;

class RemoteLink : public ::testing::Test {
protected:
  mpi::world& w() { return *the_world; }
  bool sender() { return w().rank() == 0; }
  static runtime& rt() {
    static runtime r;
    return r;
  }
};

// Rank 0: source -> outlet, drained by the sender. Rank 1: receiver -> inlet -> kernel -> sink.
TEST_F(RemoteLink, StreamCrossesRanksExactlyOnceInOrder) {
  constexpr std::uint32_t count = 200000;
  if (sender()) {
    pipeline p(rt(), {"producer"});
    auto src = p.add_source<msg>("source", ringpipe::testing::counting_source(count));
    auto out = p.add_outlet<msg>("to-rank-1");
    p.connect(src.out(), out.in());
    p.start();
    mpi::remote_options options;
    options.batch = 512;
    mpi::remote_sender tx(w(), p.outlet<msg>("to-rank-1"), 1, 0, options);
    tx.wait(120s);
    p.wait(10s);
    EXPECT_EQ(tx.stats().messages, count);
    EXPECT_LE(tx.stats().max_in_flight, tx.stats().credits);
  } else {
    pipeline p(rt(), {"consumer"});
    auto in = p.add_inlet<msg>("from-rank-0");
    auto k = p.add_kernel<msg, msg>("map", ringpipe::testing::test_kernel("test_map"), on_device(0));
    ringpipe::testing::checker check;
    check.hops = 1;
    auto sink = p.add_sink<msg>("sink", [&](const msg& m) { check(m); });
    p.connect(in.out(), k.in());
    p.connect(k.out(), sink.in());
    p.start();
    mpi::remote_receiver rx(w(), p.inlet<msg>("from-rank-0"), 0, 0);
    rx.wait(120s);
    p.wait(60s);
    EXPECT_EQ(check.expected, count);
    EXPECT_EQ(check.errors, 0u) << check.first_error;
    EXPECT_EQ(rx.stats().messages, count);
  }
}

// One link from rank 0 (options `o`) to rank 1 through a ring on each: rank 0 pushes `count`
// messages, pausing `pause` after each (10 us while the ring is full); rank 1 pops them (2 ms
// after every 8th where `slow_consumer`), expecting every one once, in order. Each end's stats.
mpi::remote_stats one_way(mpi::world& w, std::uint32_t capacity, int link, std::uint32_t count, mpi::remote_options o,
                          std::chrono::microseconds pause, bool slow_consumer) {
  auto ring = std::make_shared<ring_buffer>(capacity, sizeof(msg), ring_options{"remote-" + std::to_string(link)});
  if (w.rank() == 0) {
    mpi::remote_sender tx(w, ring, 1, link, std::move(o));
    for (std::uint32_t s = 0; s < count;) {
      const msg m = make_test_message<16>(s);
      const bool pushed = ring->push_n_bytes(&m, 1) == 1;
      s += pushed ? 1 : 0;
      if (!pushed || pause > 0us) std::this_thread::sleep_for(pushed ? pause : 10us);
    }
    ring->close();
    tx.wait(120s);
    return tx.stats();
  }
  mpi::remote_receiver rx(w, ring, 0, link);
  std::uint32_t next = 0, wrong = 0;
  while (!ring->drained()) {
    msg m;
    if (ring->pop_n_bytes(&m, 1) == 0) {
      std::this_thread::sleep_for(20us);
      continue;
    }
    if (m.seq != next++) ++wrong;
    if (slow_consumer && m.seq % 8 == 0) std::this_thread::sleep_for(2ms); // far slower than the producer
  }
  rx.wait(60s);
  EXPECT_EQ(next, count);
  EXPECT_EQ(wrong, 0u);
  return rx.stats();
}

// A consumer far slower than the producer: the sender never has more in flight than the
// receiver's ring holds, and nothing is lost.
TEST_F(RemoteLink, CreditsBoundWhatIsInFlightBehindASlowConsumer) {
  constexpr std::uint32_t capacity = 64;
  mpi::remote_options options;
  options.batch = 16;
  const auto stats = one_way(w(), capacity, 1, 3000, options, 0us, true);
  if (sender()) {
    EXPECT_EQ(stats.credits, capacity);
    EXPECT_LE(stats.max_in_flight, capacity) << "more in flight than the receiver's ring holds";
    EXPECT_GT(stats.max_in_flight, 0u);
  }
}

// Messages one at a time with pauses between them, far fewer than the ring holds: the receiver,
// idle between messages, sends no credit frame (the sender holds more than a lot of credits),
// where it sent one per message (an MPI message each way per message of a ping-pong).
TEST_F(RemoteLink, AQuietLinkSendsCreditsOnlyWhenTheSenderRunsShort) {
  const auto stats = one_way(w(), 1024, 4, 200, {}, 300us, false); // a lot: a quarter of the ring, 257
  if (!sender()) {
    EXPECT_EQ(stats.credit_frames, 0u) << "credits sent while the sender held three quarters of the ring";
  }
}

int threads_of_this_process() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

// Eight links at once, four each way, every message checked on its link: all of a rank's link
// ends move on the rank's one link thread (a thread per end took a core's turn each).
TEST_F(RemoteLink, EveryLinkOfARankMovesOnOneThread) {
  constexpr int links = 4;
  constexpr std::uint32_t count = 20000;
  const int before = threads_of_this_process();
  std::vector<std::shared_ptr<ring_buffer>> out, in;
  std::vector<std::unique_ptr<mpi::remote_sender>> tx;
  std::vector<std::unique_ptr<mpi::remote_receiver>> rx;
  const int peer = 1 - w().rank();
  for (int i = 0; i < links; ++i) { // rank 0 sends on links 20-23 and receives on 24-27; rank 1 the other way
    const int mine = 20 + i + (sender() ? 0 : links), theirs = 20 + i + (sender() ? links : 0);
    out.push_back(std::make_shared<ring_buffer>(256, sizeof(msg), ring_options{"out-" + std::to_string(mine)}));
    in.push_back(std::make_shared<ring_buffer>(256, sizeof(msg), ring_options{"in-" + std::to_string(theirs)}));
    mpi::remote_options o;
    o.batch = 64;
    tx.push_back(std::make_unique<mpi::remote_sender>(w(), out.back(), peer, mine, o));
    rx.push_back(std::make_unique<mpi::remote_receiver>(w(), in.back(), peer, theirs, o));
  }
  EXPECT_LE(threads_of_this_process(), before + 1) << "a thread per link end";
  std::vector<std::uint32_t> pushed(links), next(links), wrong(links);
  for (bool busy = true; busy;) {
    busy = false;
    for (int i = 0; i < links; ++i) {
      if (pushed[i] < count) {
        const msg m = make_test_message<16>(pushed[i]);
        pushed[i] += static_cast<std::uint32_t>(out[i]->push_n_bytes(&m, 1));
        if (pushed[i] == count) out[i]->close();
      }
      msg m;
      if (in[i]->pop_n_bytes(&m, 1) == 1 && m.seq != next[i]++) ++wrong[i];
      busy = busy || pushed[i] < count || !in[i]->drained();
    }
  }
  for (int i = 0; i < links; ++i) {
    tx[i]->wait(60s);
    rx[i]->wait(60s);
    EXPECT_EQ(next[i], count) << "link " << i;
    EXPECT_EQ(wrong[i], 0u) << "link " << i;
    EXPECT_EQ(rx[i]->stats().messages, count);
  }
}

TEST_F(RemoteLink, DifferentMessageSizesAreRefusedOnBothRanksNamingBoth) {
  auto ring = std::make_shared<ring_buffer>(64, sender() ? 16u : 32u, ring_options{"sized"});
  if (sender()) {
    mpi::remote_sender tx(w(), ring, 1, 2);
    ringpipe::testing::expect_error(
        [&] { tx.wait(60s); }, make_error_code(errc::message_size),
        {"remote link 2", "this rank sends 16-byte messages", "rank 1's ring takes 32-byte"},
        "a link with different message sizes opened");
  } else {
    mpi::remote_receiver rx(w(), ring, 0, 2);
    ringpipe::testing::expect_error([&] { rx.wait(60s); }, make_error_code(errc::message_size),
                                    {"remote link 2", "rank 0 sends 16-byte messages", "takes 32-byte"},
                                    "a link with different message sizes opened");
    EXPECT_TRUE(ring->cancelled());
  }
}

// The producing pipeline fails on rank 0: its outlet is cancelled, the sender tells rank 1, whose
// receiver fails naming rank 0 and the reason and cancels its inlet, which fails the pipeline there.
TEST_F(RemoteLink, AFailureOnOneRankReachesTheOtherWithItsReason) {
  if (sender()) {
    pipeline p(rt(), {"failing"});
    auto src = p.add_source<msg>("source", [n = 0u]() mutable -> std::optional<msg> {
      if (n == 1000) throw std::runtime_error("the sensor went away");
      return make_test_message<16>(n++);
    });
    auto out = p.add_outlet<msg>("to-rank-1");
    p.connect(src.out(), out.in());
    p.start();
    mpi::remote_sender tx(w(), p.outlet<msg>("to-rank-1"), 1, 3);
    ringpipe::testing::expect_error([&] { p.wait(60s); }, make_error_code(errc::stage_failed), {"the sensor went away"},
                                    "a failing source finished");
    ringpipe::testing::expect_error([&] { tx.wait(60s); }, make_error_code(errc::remote_failed),
                                    {"remote link 3", "cancelled", "the sensor went away"}, "the link ended cleanly");
  } else {
    pipeline p(rt(), {"downstream"});
    auto in = p.add_inlet<msg>("from-rank-0");
    std::atomic<std::uint32_t> taken{0};
    auto sink = p.add_sink<msg>("sink", [&](const msg&) { taken.fetch_add(1); });
    p.connect(in.out(), sink.in());
    p.start();
    mpi::remote_receiver rx(w(), p.inlet<msg>("from-rank-0"), 0, 3);
    // The pipeline here fails too, with rank 0's reason, long before its wait would time out.
    const auto started = std::chrono::steady_clock::now();
    ringpipe::testing::expect_error(
        [&] { p.wait(60s); }, make_error_code(errc::cancelled),
        {"pipeline 'downstream'", "stage 'from-rank-0' failed", "rank 0 gave up the link", "the sensor went away"},
        "the downstream pipeline finished");
    EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
    ringpipe::testing::expect_error([&] { rx.wait(60s); }, make_error_code(errc::remote_failed),
                                    {"remote link 3", "rank 0 gave up the link", "the sensor went away"},
                                    "the link ended cleanly");
    EXPECT_LE(taken.load(), 1000u);
  }
}

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

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 2, "mpi_remote_test", the_world);
}
