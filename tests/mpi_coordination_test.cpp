// Coordination over two ranks (run under mpirun -n 2): a barrier over participants on both ranks
// (mpi::rank_barrier) that holds every rank to each phase, checked through memory both ranks map,
// and that fails on every rank when it fails on one; an all-reduce over both ranks' device arrays
// (mpi::all_reduce), the same result in every array on every rank; a reduce to one rank and a
// reduce-scatter over ranks, with all-reduce's bits.
#include <ringpipe/mpi/rank_barrier.hpp>
#include <ringpipe/mpi/rank_collectives.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"

#include "mpi_test_main.hpp"

#include <gtest/gtest.h>

#include <mpi.h>

#include <atomic>
#include <bit>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

class RankCoordination : public ringpipe::testing::OnRanks {};

// Arrivals per phase in memory both ranks map (they run on one machine): a phase released on any
// rank must have had every participant of every rank arrive.
class shared_counts {
public:
  shared_counts(mpi::world& w, std::size_t phases) : bytes_(phases * sizeof(std::atomic<std::uint32_t>)), w_(w) {
    int id = static_cast<int>(getpid());
    {
      std::lock_guard lock(w.lock());
      MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    name_ = "/ringpipe-rank-barrier-test-" + std::to_string(id);
    if (w.rank() == 0) {
      const int fd = shm_open(name_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes_)) != 0) throw std::runtime_error("shm_open");
      close(fd);
    }
    {
      std::lock_guard lock(w.lock());
      MPI_Barrier(MPI_COMM_WORLD);
    }
    const int fd = shm_open(name_.c_str(), O_RDWR, 0600);
    void* at = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (at == MAP_FAILED) throw std::runtime_error("mmap");
    at_ = static_cast<std::atomic<std::uint32_t>*>(at);
  }
  ~shared_counts() {
    munmap(at_, bytes_);
    std::lock_guard lock(w_.lock());
    MPI_Barrier(MPI_COMM_WORLD);
    if (w_.rank() == 0) shm_unlink(name_.c_str());
  }
  std::atomic<std::uint32_t>& operator[](std::size_t k) { return at_[k]; }

private:
  std::size_t bytes_;
  mpi::world& w_;
  std::string name_;
  std::atomic<std::uint32_t>* at_ = nullptr;
};

TEST_F(RankCoordination, ARankBarrierHoldsEveryRankToEachPhase) {
  constexpr std::uint32_t phases = 300;
  shared_counts arrived(w(), phases);
  std::atomic<std::uint32_t> early{0};
  {
    barrier_options options;
    options.name = "step";
    options.timeout = 20s;
    mpi::rank_barrier b(w(), {"a", "b"}, options);
    const auto run = [&](const char* who) {
      const auto me = b.participant(who);
      for (std::uint32_t k = 0; k < phases; ++k) {
        if (w().rank() == 1 && k % 50 == 7) std::this_thread::sleep_for(2ms); // rank 1 late now and then
        arrived[k].fetch_add(1);
        b.arrive_and_wait(me);
        if (arrived[k].load() != 4) early.fetch_add(1); // released before all four arrived
      }
    };
    std::thread other(run, "b");
    run("a");
    other.join();
    EXPECT_EQ(b.phase(), phases);
  }
  EXPECT_EQ(early.load(), 0u) << "participants released before every rank arrived";
}

TEST_F(RankCoordination, ARankBarrierFailingOnOneRankFailsItOnEveryRank) {
  for (const bool by_timeout : {false, true}) {
    // Rank 1 fails its barrier in phase 3: by fail(), or by a participant that never arrives.
    std::vector<barrier_participant> members{"driver"};
    if (by_timeout && !sender()) members.emplace_back("absent");
    barrier_options options;
    options.name = "fragile";
    options.timeout = by_timeout ? 500ms : 10s;
    mpi::rank_barrier b(w(), members, options);
    const auto me = b.participant("driver");
    for (int k = 0; k < 3; ++k) {
      if (by_timeout && !sender()) (void)b.arrive(b.participant("absent"));
      b.arrive_and_wait(me);
    }
    const auto started = std::chrono::steady_clock::now();
    if (!sender() && !by_timeout) {
      b.fail("the driver on rank 1 gave up");
      EXPECT_THROW(b.arrive_and_wait(me), ringpipe::error);
    } else {
      // Rank 0 learns of rank 1's failure in phase 3's exchange; rank 1's driver gets its timeout.
      const std::vector<std::string> words =
          sender() ? std::vector<std::string>{"rank barrier 'fragile' on rank 0, phase 3", "failed on rank 1"}
                   : std::vector<std::string>{"phase 3", "'absent' did not arrive"};
      try {
        b.arrive_and_wait(me);
        ADD_FAILURE() << "released in phase 3 on rank " << w().rank();
      } catch (const ringpipe::error& e) {
        for (const auto& word : words)
          EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << "'" << word << "' not in: " << e.what();
      }
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  }
}

TEST_F(RankCoordination, AllReduceOverRanksGivesEveryArrayOnEveryRankTheSameResult) {
  // Two arrays on this rank's device 0; every element a whole number, so float sums are exact.
  const std::size_t n = 100000;
  const float r = static_cast<float>(w().rank() + 1);
  std::vector<device_array<float>> arrays;
  for (int a = 0; a < 2; ++a) {
    device_array<float> x(rt(), rt().device_at(0), n, "x" + std::to_string(a));
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(i % 1000) * r + static_cast<float>(a);
    x.write(std::span<const float>(v), 10s);
    arrays.push_back(x);
  }
  mpi::all_reduce(w(), arrays, reduction<float>::sum());
  // Ranks 1 and 2 (r), arrays 0 and 1 (a): 2 * 3 * (i % 1000) + 2 * (0 + 1).
  for (const auto& x : arrays) {
    std::vector<float> got(n);
    x.read(std::span<float>(got), 10s);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += got[i] != 6.0f * static_cast<float>(i % 1000) + 2.0f ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << x.name() << " on rank " << w().rank() << ": first " << got[0] << ", " << got[1];
  }
  ringpipe::testing::expect_error([&] { mpi::all_reduce(w(), arrays, reduction<float>::custom("fmax", "fmax(a, b)")); },
                                  make_error_code(errc::invalid_argument), {"(fmax) on rank", "no host form"},
                                  "a reduction without a host form was combined across ranks");
}

// `count` arrays of `n` T on device 0, element i of array a = value(a, i).
template <class T, class Value>
std::vector<device_array<T>> arrays_of(runtime& rt, std::size_t count, std::size_t n, Value value) {
  std::vector<device_array<T>> arrays;
  for (std::size_t a = 0; a < count; ++a) {
    device_array<T> x(rt, rt.device_at(0), n, "a" + std::to_string(a));
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = value(a, i);
    x.write(std::span<const T>(v), 10s);
    arrays.push_back(x);
  }
  return arrays;
}

// Element i of array a = base + 1000 * a + i.
std::vector<device_array<int>> int_arrays(runtime& rt, std::size_t count, std::size_t n, int base) {
  return arrays_of<int>(rt, count, n, [base](std::size_t a, std::size_t i) {
    return base + 1000 * static_cast<int>(a) + static_cast<int>(i);
  });
}

// Elements of `x` that differ from base + 1000 * a + i (for the arrays each rank gathers).
std::size_t wrong_in(const std::vector<int>& got, std::size_t from, std::size_t n, int base) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += got[from + i] != base + static_cast<int>(i) ? 1 : 0;
  return wrong;
}

TEST_F(RankCoordination, BroadcastGatherAndAllGatherOverRanksMoveEveryRanksArrays) {
  const int me = w().rank();
  for (int root = 0; root < 2; ++root) { // the root's first array, into every array of both ranks
    auto arrays = int_arrays(rt(), 3, 5000, me == root ? 7 : -100000);
    mpi::broadcast(w(), root, arrays);
    for (const auto& x : arrays) {
      std::vector<int> got(5000);
      x.read(std::span<int>(got), 10s);
      EXPECT_EQ(wrong_in(got, 0, 5000, 7), 0u) << x.name() << " on rank " << me << ", root " << root;
    }
  }
  // Rank r passes r + 1 arrays of 100 (r + 1) ints: rank 0's one, then rank 1's two, back to back.
  const auto in =
      int_arrays(rt(), static_cast<std::size_t>(me) + 1, 100 * static_cast<std::size_t>(me + 1), 100000 * me);
  const auto check = [](const std::vector<int>& got, const std::string& where) {
    EXPECT_EQ(wrong_in(got, 0, 100, 0), 0u) << where << ": rank 0's array";
    EXPECT_EQ(wrong_in(got, 100, 200, 100000), 0u) << where << ": rank 1's first array";
    EXPECT_EQ(wrong_in(got, 300, 200, 101000), 0u) << where << ": rank 1's second array";
  };
  std::vector<int> gathered(me == 1 ? 500 : 0);
  mpi::gather(w(), 1, in, std::span<int>(gathered));
  if (me == 1) check(gathered, "gather to rank 1");
  const auto out = int_arrays(rt(), 2, 500, 0);
  mpi::all_gather(w(), in, out);
  for (const auto& x : out) {
    std::vector<int> got(500);
    x.read(std::span<int>(got), 10s);
    check(got, x.name() + " on rank " + std::to_string(me));
  }
}

// Float arrays whose sums depend on the order they are added in.
std::vector<device_array<float>> float_arrays(runtime& rt, std::size_t count, std::size_t n, int rank) {
  return arrays_of<float>(rt, count, n, [rank](std::size_t a, std::size_t i) {
    return 0.1f * static_cast<float>(i + 1) * static_cast<float>(rank + 1) + 1e-7f * static_cast<float>(a);
  });
}

// Whether `a` and `b` hold the same bits, element by element.
bool same_bits(const float* a, const float* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

TEST_F(RankCoordination, ReduceToOneRankAndReduceScatterOverRanksGiveAllReducesResult) {
  const int me = w().rank();
  const std::size_t m = 3000; // elements per rank's part
  // Integers: 2 arrays on each rank, element i of array a on rank r = (r + 1) i + 1000 a.
  const auto in = int_arrays(rt(), 2, 2 * m, 0);
  for (std::size_t a = 0; a < in.size(); ++a) {
    std::vector<int> v(2 * m);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = (me + 1) * static_cast<int>(i) + 1000 * static_cast<int>(a);
    in[a].write(std::span<const int>(v), 10s);
  }
  const auto expected = [](std::size_t i) { return 6 * static_cast<int>(i) + 2000; }; // (1 + 2) i * 2 + 1000 * 2
  for (int root = 0; root < 2; ++root) {
    std::vector<int> host(me == root ? 2 * m : 0, -1);
    mpi::reduce(w(), root, in, std::span<int>(host), reduction<int>::sum());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < host.size(); ++i)
      wrong += host[i] != expected(i) ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "reduce to rank " << root << ", on rank " << me;
  }
  const auto out = int_arrays(rt(), 2, m, -1);
  mpi::reduce_scatter(w(), in, out, reduction<int>::sum());
  for (const auto& x : out) { // part `me` of the sum
    std::vector<int> got(m);
    x.read(std::span<int>(got), 10s);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < m; ++i)
      wrong += got[i] != expected(static_cast<std::size_t>(me) * m + i) ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << x.name() << " on rank " << me << ": first " << got[0];
  }
  // Floats, whose sums depend on their order: the same bits as all_reduce, element by element.
  const auto f = float_arrays(rt(), 3, 2 * m, me);
  const auto all = float_arrays(rt(), 3, 2 * m, me);
  mpi::all_reduce(w(), all, reduction<float>::sum());
  std::vector<float> reference(2 * m), reduced(me == 0 ? 2 * m : 0), part(m);
  all.front().read(std::span<float>(reference), 10s);
  mpi::reduce(w(), 0, f, std::span<float>(reduced), reduction<float>::sum());
  const auto fout = float_arrays(rt(), 1, m, me);
  mpi::reduce_scatter(w(), f, fout, reduction<float>::sum());
  fout.front().read(std::span<float>(part), 10s);
  if (me == 0) {
    EXPECT_TRUE(same_bits(reduced.data(), reference.data(), reduced.size()))
        << "reduce's result differs from all_reduce's";
  }
  EXPECT_TRUE(same_bits(part.data(), reference.data() + static_cast<std::size_t>(me) * m, m))
      << "reduce_scatter's part on rank " << me << " differs from all_reduce's";
}

TEST_F(RankCoordination, SizesThatDoNotAgreeAreRefusedOnEveryRankBeforeAnythingMoves) {
  const int me = w().rank();
  auto uneven = int_arrays(rt(), 1, me == 0 ? 100 : 101, 0);
  ringpipe::testing::expect_error([&] { mpi::broadcast(w(), 0, uneven); }, make_error_code(errc::invalid_argument),
                                  {"(broadcast from rank 0) on rank", "rank 0's (400 bytes)", "rank 1: 404 bytes"},
                                  "arrays of different sizes were broadcast");
  std::vector<int> small(me == 0 ? 150 : 0);
  const auto in = int_arrays(rt(), 1, 100, 0);
  ringpipe::testing::expect_error(
      [&] { mpi::gather(w(), 0, in, std::span<int>(small)); }, make_error_code(errc::invalid_argument),
      {"(gather to rank 0)", "the result is 800 bytes; rank 0 has 600 bytes"}, "a gather into too small a span ran");
  const auto odd = int_arrays(rt(), 1, 101, 0), half = int_arrays(rt(), 1, 50, 0);
  ringpipe::testing::expect_error([&] { mpi::reduce_scatter(w(), odd, half, reduction<int>::sum()); },
                                  make_error_code(errc::invalid_argument),
                                  {"(sum, reduce-scatter) on rank", "101 elements do not split into 2 equal parts"},
                                  "an input that does not split over the ranks was reduce-scattered");
  std::vector<int> room(me == 1 ? 99 : 0);
  ringpipe::testing::expect_error([&] { mpi::reduce(w(), 1, in, std::span<int>(room), reduction<int>::sum()); },
                                  make_error_code(errc::invalid_argument),
                                  {"(sum, reduce to rank 1) on rank", "the result is 400 bytes; rank 1 has 396 bytes"},
                                  "a reduce into too small a span ran");
  // Nothing was left half done: the next call works on both ranks.
  auto fine = int_arrays(rt(), 1, 100, me == 0 ? 5 : 0);
  mpi::broadcast(w(), 0, fine);
  std::vector<int> got(100);
  fine.front().read(std::span<int>(got), 10s);
  EXPECT_EQ(wrong_in(got, 0, 100, 5), 0u);
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ringpipe::testing::run_on_ranks(argc, argv, 2, "mpi_coordination_test");
}
