// One pipeline over three ranks (run under mpirun -n 3): source on rank 0, a ring kernel on each of
// ranks 1 and 2, the checking sink back on rank 0, declared alike on every rank
// (mpi::distributed_pipeline). Streams of 16-byte and 4 KiB messages checked message by message;
// a sink far slower than the source with memory flat on every rank; a stop mid-stream that
// accounts for every message over the ranks; a rank that stops answering reported by the others
// within the link timeout.
//   mpi_pipeline_test [--messages-4k N] [--slow-seconds S]   (defaults 1000000 and 30)
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using ringpipe::testing::the_world;
std::uint32_t messages_4k = 1000000;
int slow_seconds = 30;

runtime& rt() {
  static runtime r;
  return r;
}

// Checks exactly-once, in-order delivery after `hops` passes through test_map, message by message.
template <std::size_t N> struct in_order {
  int hops = 2;
  std::uint32_t expected = 0, errors = 0;
  void operator()(const test_message<N>& m) {
    if (m.seq != expected || m.check != test_check_after(m.seq, hops) || m.payload[0] != m.seq ||
        m.payload.back() != m.seq + static_cast<std::uint32_t>(m.payload.size() - 1))
      ++errors;
    expected = m.seq + 1;
  }
};

// source (0) -> first (1) -> second (2) -> check (0); `pace` runs in the sink per message.
template <std::size_t N> struct three_ranks {
  pipeline p;
  in_order<N> check;
  std::function<void()> pace;
  std::atomic<std::uint32_t> made{0}; // by the source
  three_ranks(std::uint32_t count, std::uint32_t capacity) : p(rt(), {.name = "three-ranks"}) {
    auto src = p.add_source<test_message<N>>("source", [this, count]() -> std::optional<test_message<N>> {
      const auto n = made.load(std::memory_order_relaxed);
      if (n == count) return std::nullopt;
      made.store(n + 1, std::memory_order_relaxed);
      return make_test_message<N>(n);
    });
    const kernel_spec spec{test_stages_source(N), "test_map"};
    auto first = p.add_kernel<test_message<N>, test_message<N>>("first", spec);
    auto second = p.add_kernel<test_message<N>, test_message<N>>("second", spec);
    auto sink = p.add_sink<test_message<N>>("check", [this](const test_message<N>& m) {
      check(m);
      if (pace) pace();
    });
    p.connect(src.out(), first.in(), {std::nullopt, capacity});
    p.connect(first.out(), second.in(), {std::nullopt, capacity});
    p.connect(second.out(), sink.in(), {std::nullopt, capacity});
    p.on_rank(first, 1);
    p.on_rank(second, 2);
  }
};

template <std::size_t N> void stream_through_three_ranks(std::uint32_t count, std::uint32_t capacity) {
  three_ranks<N> t(count, capacity);
  mpi::distributed_pipeline d(*the_world, t.p);
  d.run(10min);
  for (const auto& s : d.link_stats())
    EXPECT_EQ(s.messages, count);
  if (the_world->rank() == 0) {
    EXPECT_EQ(t.check.expected, count);
    EXPECT_EQ(t.check.errors, 0u);
  }
}

TEST(ThreeRanks, AMillion16ByteMessagesArriveOnceInOrder) { stream_through_three_ranks<16>(1000000, 65536); }

TEST(ThreeRanks, FourKiBMessagesArriveOnceInOrder) { stream_through_three_ranks<4096>(messages_4k, 1024); }

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

TEST(ThreeRanks, ASlowSinkKeepsMemoryFlatOnEveryRank) {
  // The source could go ten times faster than the sink for the whole run: credits hold it back,
  // so every rank's memory stays flat after the rings have filled.
  three_ranks<256> t(1u << 30, 4096);
  const auto started = std::chrono::steady_clock::now();
  const auto end = started + std::chrono::seconds(slow_seconds);
  std::atomic<bool> stopping{false};
  std::uint32_t taken = 0;
  t.pace = [&] {
    if (++taken % 64 == 0) std::this_thread::sleep_for(1ms); // about 60,000 messages per second at most
    if (std::chrono::steady_clock::now() > end && !stopping.exchange(true))
      throw std::runtime_error("enough: the slow sink ends the run"); // fails the pipeline on every rank
  };
  // What this checks is the requirement, memory flat on every rank; it is not what tells whether
  // the credits work. Between ranks of one machine Open MPI's shared-memory transport also holds a
  // sender back (a send completes once the receiver makes progress): with the credits switched
  // off this test still passed (checked, 12 s runs). RemoteLink.CreditsBound... in
  // mpi_remote_test checks the credits themselves.
  mpi::distributed_pipeline d(*the_world, t.p);
  d.start();
  std::this_thread::sleep_for(std::chrono::seconds(slow_seconds) / 6);
  const std::size_t early = resident_bytes();
  std::size_t late = early;
  try {
    while (std::chrono::steady_clock::now() < end - 1s) {
      std::this_thread::sleep_for(500ms);
      late = std::max(late, resident_bytes());
    }
    d.wait(2min);
    ADD_FAILURE() << "the run did not end with the sink's error";
  } catch (const ringpipe::error& e) {
    EXPECT_NE(std::string(e.what()).find("enough: the slow sink ends the run"), std::string::npos) << e.what();
  }
  std::fprintf(stderr, "rank %d: resident memory %.1f MiB after %d s, at most %.1f MiB later\n", the_world->rank(),
               static_cast<double>(early) / (1 << 20), slow_seconds / 6, static_cast<double>(late) / (1 << 20));
  EXPECT_LT(late, early + (8u << 20)) << "rank " << the_world->rank() << ": resident memory grew from " << early
                                      << " to " << late << " bytes";
  if (the_world->rank() == 0) {
    EXPECT_EQ(t.check.errors, 0u);
    EXPECT_GT(t.check.expected, 10000u);
  }
}

// Waits for `r` without holding the world's lock between tests (remote links need it).
void complete(MPI_Request& r) {
  for (int done = 0; done == 0; std::this_thread::sleep_for(1ms)) {
    std::lock_guard lock(the_world->lock());
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  }
}

// Every rank waits here for the others.
void meet() {
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(the_world->lock());
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
  }
  complete(r);
}

TEST(ThreeRanks, AStopMidStreamAccountsForEveryMessageOnEveryRank) {
  // Every rank stops once rank 0's slow sink has taken 2,000 messages, with every ring full behind
  // it: each message the source made was delivered, or is counted once in the report, which every
  // rank gets alike.
  three_ranks<16> t(1u << 30, 256);
  std::atomic<std::uint32_t> delivered{0};
  t.pace = [&] {
    std::this_thread::sleep_for(20us);
    delivered.fetch_add(1, std::memory_order_relaxed);
  };
  mpi::distributed_pipeline d(*the_world, t.p);
  d.start();
  if (the_world->rank() == 0) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (delivered.load() < 2000 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  }
  meet();
  const auto report = d.stop();
  std::fprintf(stderr, "rank %d: %s\n", the_world->rank(), report.text().c_str());
  ASSERT_TRUE(report.complete) << report.missing;
  ASSERT_EQ(report.ranks.size(), 3u);
  // What this rank's rings held when it stopped. (Its share in report.ranks can be smaller: a
  // frame its link abandoned after the next rank took it is counted there, not twice.)
  EXPECT_GT(report.here.undelivered, 0u) << "rank " << the_world->rank()
                                         << " held nothing: the stop was not mid-stream";
  EXPECT_NE(report.text().find(" messages undelivered over 3 ranks: rank 0: "), std::string::npos) << report.text();
  std::vector<std::uint64_t> totals(3), mine{report.undelivered()};
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(the_world->lock());
    MPI_Iallgather(mine.data(), 1, MPI_UINT64_T, totals.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &r);
  }
  complete(r);
  EXPECT_EQ(totals[0], totals[1]);
  EXPECT_EQ(totals[0], totals[2]);
  if (the_world->rank() == 0) {
    EXPECT_GE(delivered.load(), 2000u);
    EXPECT_EQ(t.check.errors, 0u);
    EXPECT_EQ(t.made.load(), delivered.load() + report.undelivered() + report.lost())
        << "made " << t.made.load() << ", delivered " << delivered.load() << "; " << report.text();
  }
}

TEST(StopCounts, InTransitAndAbandonedSendsAreCountedOnce) {
  // Connection 0 (rank 0 -> 1): 10 sent, 7 received: 3 in transit. Connection 1 (rank 1 -> 0):
  // 5 sent, 8 received: a frame of 3 abandoned by rank 1 after rank 0 took it, so 3 of rank 1's
  // 20 are not counted again.
  const std::vector<std::uint64_t> counts{10, 7, 1, 2, 5, 8, 2, 1, 4, 0, 20, 1};
  mpi::distributed_stop_report r;
  mpi::detail::settle_counts(counts, 2, 2, r);
  ASSERT_TRUE(r.complete);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].undelivered, 4u);
  EXPECT_EQ(r.ranks[1].undelivered, 17u);
  EXPECT_EQ(r.ranks[1].lost, 1u);
  ASSERT_EQ(r.in_transit.size(), 1u);
  EXPECT_EQ(r.in_transit[0].index, 0u);
  EXPECT_EQ(r.in_transit[0].from_rank, 0);
  EXPECT_EQ(r.in_transit[0].to_rank, 1);
  EXPECT_EQ(r.in_transit[0].messages, 3u);
  EXPECT_EQ(r.undelivered(), 24u);
  EXPECT_EQ(r.lost(), 1u);
  const std::string expected = "24 messages undelivered over 2 ranks: rank 0: 4, rank 1: 17 (1 lost); 3 in transit "
                               "between ranks (3 from rank 0 to rank 1). Here: ";
  EXPECT_EQ(r.text().substr(0, expected.size()), expected);
}

TEST(ThreeRanks, ARankThatStopsAnsweringIsReportedByTheOthers) {
  // Rank 2 stops (SIGSTOP) mid-stream; ranks 0 and 1 fail within the link timeout naming it. Then
  // rank 0 lets it go on (SIGCONT); its links have failed meanwhile, so it fails too.
  int pid = static_cast<int>(getpid());
  std::vector<int> pids(3);
  {
    std::lock_guard lock(the_world->lock());
    MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  }
  three_ranks<16> t(1u << 30, 1024);
  std::uint32_t seen = 0;
  mpi::distributed_options options;
  options.link.timeout = 2s;
  mpi::distributed_pipeline d(*the_world, t.p, options);
  d.start();
  if (the_world->rank() == 2) {
    std::this_thread::sleep_for(300ms);
    raise(SIGSTOP);
  }
  const auto started = std::chrono::steady_clock::now();
  try {
    d.wait(60s);
    ADD_FAILURE() << "the pipeline finished";
  } catch (const ringpipe::error& e) {
    std::fprintf(stderr, "rank %d: %s\n", the_world->rank(), e.what()); // what each rank says
    if (the_world->rank() != 2) {
      EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
      const std::string what = e.what();
      EXPECT_TRUE(what.find("rank 2") != std::string::npos) << what;
      // Silence, a frame it does not take, or another rank giving up because of it.
      EXPECT_TRUE(what.find("sent nothing for") != std::string::npos ||
                  what.find("did not complete a") != std::string::npos ||
                  what.find("gave up the link") != std::string::npos)
          << what;
    }
  }
  if (the_world->rank() == 0) kill(pids[2], SIGCONT);
  seen = t.check.expected;
  if (the_world->rank() == 0) {
    EXPECT_EQ(t.check.errors, 0u) << "after " << seen << " messages";
  }
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--messages-4k")) messages_4k = static_cast<std::uint32_t>(std::stoul(argv[i + 1]));
    if (!std::strcmp(argv[i], "--slow-seconds")) slow_seconds = std::stoi(argv[i + 1]);
  }
  return ringpipe::testing::run_on_ranks(argc, argv, 3, "mpi_pipeline_test");
}
