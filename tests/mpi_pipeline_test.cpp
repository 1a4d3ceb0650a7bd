// One pipeline over three ranks (run under mpirun -n 3): source on rank 0, a ring kernel on each of
// ranks 1 and 2, the checking sink back on rank 0, declared alike on every rank
// (mpi::distributed_pipeline). Streams of 16-byte and 4 KiB messages checked message by message;
// a sink far slower than the source with memory flat on every rank; a rank that stops answering
// reported by the others within the link timeout.
//   mpi_pipeline_test [--messages-4k N] [--slow-seconds S]   (defaults 1000000 and 30)
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "pipeline_fixture.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

mpi::world* the_world = nullptr;
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
  three_ranks(std::uint32_t count, std::uint32_t capacity) : p(rt(), {.name = "three-ranks"}) {
    auto src = p.add_source<test_message<N>>("source", [n = 0u, count]() mutable -> std::optional<test_message<N>> {
      if (n == count) return std::nullopt;
      return make_test_message<N>(n++);
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
  return ringpipe::testing::run_on_ranks(argc, argv, 3, "mpi_pipeline_test", the_world);
}
