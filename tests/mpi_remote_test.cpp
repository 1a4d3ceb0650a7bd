// Remote links between two ranks (run under mpirun -n 2): a stream from a pipeline on rank 0
// through a ring kernel on rank 1, exactly once and in order; credits that bound what is in
// flight behind a slow consumer; message sizes that differ refused on both ranks; a failure on
// rank 0 reaching rank 1 with its reason. One pipeline declared on both ranks
// (mpi::distributed_pipeline): mpi_distributed_test.cpp, in the same runs.
#include <ringpipe/mpi/remote.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include "mpi_remote_fixture.hpp"
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
using ringpipe::testing::RemoteLink;

namespace {

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

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 2, "mpi_remote_test");
}
