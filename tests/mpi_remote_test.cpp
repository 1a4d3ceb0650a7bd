// Remote links between two ranks (run under mpirun -n 2): a stream from a pipeline on rank 0
// through a ring kernel on rank 1, exactly once and in order; credits that bound what is in
// flight behind a slow consumer; message sizes that differ refused on both ranks; a failure on
// rank 0 reaching rank 1 with its reason.
#include <ringpipe/mpi/remote.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <atomic>
#include <thread>

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

// A consumer far slower than the producer: the sender never has more in flight than the
// receiver's ring holds, and nothing is lost.
TEST_F(RemoteLink, CreditsBoundWhatIsInFlightBehindASlowConsumer) {
  constexpr std::uint32_t count = 3000, capacity = 64;
  auto ring = std::make_shared<ring_buffer>(capacity, sizeof(msg), ring_options{"remote-slow"});
  if (sender()) {
    mpi::remote_options options;
    options.batch = 16;
    mpi::remote_sender tx(w(), ring, 1, 1, options);
    for (std::uint32_t s = 0; s < count;) {
      const msg m = make_test_message<16>(s);
      if (ring->push_n_bytes(&m, 1) == 1)
        ++s;
      else
        std::this_thread::sleep_for(10us);
    }
    ring->close();
    tx.wait(120s);
    EXPECT_EQ(tx.stats().credits, capacity);
    EXPECT_LE(tx.stats().max_in_flight, capacity) << "more in flight than the receiver's ring holds";
    EXPECT_GT(tx.stats().max_in_flight, 0u);
  } else {
    mpi::remote_receiver rx(w(), ring, 0, 1);
    std::uint32_t next = 0, wrong = 0;
    while (!ring->drained()) {
      msg m;
      if (ring->pop_n_bytes(&m, 1) == 0) {
        std::this_thread::sleep_for(20us);
        continue;
      }
      if (m.seq != next++) ++wrong;
      if (m.seq % 8 == 0) std::this_thread::sleep_for(2ms); // far slower than the producer
    }
    rx.wait(60s);
    EXPECT_EQ(next, count);
    EXPECT_EQ(wrong, 0u);
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
  mpi::world world(argc, argv);
  the_world = &world;
  if (world.size() != 2) {
    std::fprintf(stderr, "mpi_remote_test runs on 2 ranks (mpirun -n 2), not %d\n", world.size());
    return 1;
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  {
    std::lock_guard lock(world.lock());
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  return any;
}
