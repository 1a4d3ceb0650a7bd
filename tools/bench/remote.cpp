// remote: messages between stages on two MPI ranks (ringpipe::mpi), against raw MPI in the same
// run: one-way latency of 8-byte messages (half a ping-pong: ringpipe through an inlet on rank 0,
// a remote link, an outlet and an inlet on rank 1 echoing, and back; MPI_Send/MPI_Recv), and
// streaming throughput of 16 B, 4 KiB and 1 MiB messages (a batch source on rank 0 to a batch sink
// on rank 1, every message's sequence number checked; MPI_Send of each message, MPI_Recv). Runs
// under `mpirun -n 2`; ringpipe-bench then runs this topic alone and rank 0 writes the results.

#include "bench.hpp"

#include <ringpipe/mpi/distributed_pipeline.hpp>

#include <mpi.h>
#include <sys/mman.h>

#include <cstring>
#include <optional>
#include <span>
#include <thread>

namespace ringpipe::bench {
namespace {

constexpr int tag = 77; // raw MPI's own tag, clear of the remote links' (2 * link number + 0/1)

// Every MPI call here holds the world's lock, and is made while no remote link runs.
void all_arrive(mpi::world& w) {
  std::lock_guard lock(w.lock());
  MPI_Barrier(MPI_COMM_WORLD);
}
double from_rank_1(mpi::world& w, double value) { // rank 1's value, on rank 0
  std::lock_guard lock(w.lock());
  if (w.rank() == 1) MPI_Send(&value, 1, MPI_DOUBLE, 0, tag, MPI_COMM_WORLD);
  if (w.rank() == 0) MPI_Recv(&value, 1, MPI_DOUBLE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return value;
}

std::vector<double> mpi_one_way_us(mpi::world& w, std::uint32_t samples) {
  std::uint64_t m = 0;
  std::vector<double> us;
  all_arrive(w);
  std::lock_guard lock(w.lock());
  for (std::uint32_t i = 0; i < samples + samples / 10; ++i) { // the first tenth warms up
    const auto t0 = clock_type::now();
    if (w.rank() == 0) {
      MPI_Send(&m, 8, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
      MPI_Recv(&m, 8, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (i >= samples / 10)
        us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 2);
      ++m;
    } else {
      MPI_Recv(&m, 8, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&m, 8, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
    }
  }
  return us;
}

std::vector<double> ringpipe_one_way_us(mpi::world& w, runtime& rt, std::uint32_t samples) {
  pipeline p(rt, {.name = "remote-ping"});
  auto ping = p.add_inlet<std::uint64_t>("ping");
  auto ping_1 = p.add_outlet<std::uint64_t>("ping_1");
  auto pong_1 = p.add_inlet<std::uint64_t>("pong_1");
  auto pong = p.add_outlet<std::uint64_t>("pong");
  p.connect(ping.out(), ping_1.in(), {std::nullopt, 1024});
  p.connect(pong_1.out(), pong.in(), {std::nullopt, 1024});
  p.on_rank(ping_1, 1);
  p.on_rank(pong_1, 1);
  mpi::distributed_pipeline d(w, p);
  all_arrive(w);
  d.start();
  std::vector<double> us;
  if (w.rank() == 0) {
    auto out = p.inlet<std::uint64_t>("ping");
    auto back = p.outlet<std::uint64_t>("pong");
    for (std::uint64_t i = 0; i < samples + samples / 10; ++i) {
      std::uint64_t m = i;
      const auto t0 = clock_type::now();
      out.push(m, 10s);
      if (!back.pop(m, 10s) || m != i) throw std::runtime_error("remote ping-pong: wrong answer");
      if (i >= samples / 10)
        us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 2);
    }
    out.close();
  } else {
    auto in = p.outlet<std::uint64_t>("ping_1");
    auto echo = p.inlet<std::uint64_t>("pong_1");
    for (std::uint64_t m = 0; in.pop(m, 60s);)
      echo.push(m, 10s);
    echo.close();
  }
  d.wait(60s);
  return us;
}

// A stream's time two ways: from rank 0's start to rank 1's last message (`total`, what the
// application waits: for ringpipe the pipeline's start and teardown too), and the steady rate on
// rank 1, from its first arrival to its last (`steady`, as seconds for all n messages at that rate;
// the messages of the first arrival are not counted in it). Both on rank 0.
struct stream_time {
  double total = 0, steady = 0;
};

// Marks arrivals on the receiving rank: the first arrival's time and size, and the last time.
struct arrival_clock {
  clock_type::time_point first{}, last{};
  std::uint32_t first_count = 0;
  void arrived(std::uint32_t count) {
    last = clock_type::now();
    if (first_count == 0) first = last, first_count = count;
  }
  double steady_seconds(std::uint32_t n) const {
    const double s = std::chrono::duration<double>(last - first).count();
    return n > first_count && s > 0 ? s * n / (n - first_count) : 0;
  }
};

// Fresh anonymous memory, zero-filled, on the kernel's default pages or advised onto huge pages.
// Not a std::vector: its allocation could reuse a freed ring that was advised onto huge pages.
class fresh_memory {
public:
  fresh_memory(std::size_t bytes, bool huge) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("remote bench: mmap of " + std::to_string(bytes) + " bytes failed");
    data_ = static_cast<std::byte*>(p);
    if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(data_, 0, bytes); // touched first here, as a vector's zero-fill does
  }
  ~fresh_memory() { munmap(data_, bytes_); }
  fresh_memory(const fresh_memory&) = delete;
  fresh_memory& operator=(const fresh_memory&) = delete;
  std::byte* data() const { return data_; }

private:
  std::size_t bytes_;
  std::byte* data_ = nullptr;
};

// Rank 0 sends `n` messages of `bytes` that rank 1 has all received (its ack), from and into
// `buffers` buffers used in turn (1: one buffer, what MPI benchmarks do; as many as a ring's slots:
// the memory a stream through rings touches), on default pages or on huge pages (`huge`).
stream_time mpi_stream_seconds(mpi::world& w, std::size_t bytes, std::uint32_t n, std::size_t buffers = 1,
                               bool huge = false) {
  fresh_memory all(bytes * buffers, huge);
  arrival_clock arrivals;
  stream_time t;
  all_arrive(w);
  {
    std::lock_guard lock(w.lock());
    const auto t0 = clock_type::now();
    char ack = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::byte* buffer = all.data() + (i % buffers) * bytes;
      if (w.rank() == 0) {
        std::memcpy(buffer, &i, sizeof i);
        MPI_Send(buffer, static_cast<int>(bytes), MPI_BYTE, 1, tag, MPI_COMM_WORLD);
      } else {
        MPI_Recv(buffer, static_cast<int>(bytes), MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        arrivals.arrived(1);
        std::uint32_t seq = 0;
        std::memcpy(&seq, buffer, sizeof seq);
        if (seq != i) ack = 1;
      }
    }
    if (w.rank() == 1) MPI_Send(&ack, 1, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
    if (w.rank() == 0) MPI_Recv(&ack, 1, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (ack != 0) throw std::runtime_error("raw MPI stream: messages out of order");
    t.total = seconds_since(t0);
  }
  t.steady = from_rank_1(w, arrivals.steady_seconds(n));
  return t;
}

template <std::size_t Bytes> struct blob {
  std::uint32_t seq;
  std::byte rest[Bytes - sizeof(std::uint32_t)];
};

// Seconds for the stream, through rings of `capacity` slots (0: the pipeline's default, which
// `slots` then says).
template <std::size_t Bytes>
stream_time ringpipe_stream_seconds(mpi::world& w, runtime& rt, std::uint32_t n, std::uint32_t capacity,
                                    std::uint32_t* slots = nullptr) {
  using msg = blob<Bytes>;
  pipeline p(rt, {.name = "remote-stream"});
  auto src =
      p.add_source_batch<msg>("source", [next = 0u, n](std::span<msg> room) mutable -> std::optional<std::size_t> {
        if (next == n) return std::nullopt;
        const std::size_t k = std::min<std::size_t>(room.size(), n - next);
        for (std::size_t i = 0; i < k; ++i)
          room[i].seq = next++;
        return k;
      });
  std::uint32_t expected = 0, wrong = 0;
  arrival_clock arrivals;
  auto sink = p.add_sink_batch<msg>("sink", [&](std::span<const msg> got) {
    arrivals.arrived(static_cast<std::uint32_t>(got.size()));
    for (const auto& m : got)
      wrong += m.seq != expected++ ? 1 : 0;
  });
  p.connect(src.out(), sink.in(), {std::nullopt, capacity});
  p.on_rank(sink, 1);
  mpi::distributed_pipeline d(w, p);
  all_arrive(w);
  const auto t0 = clock_type::now();
  d.run(10min);
  if (w.rank() == 1 && (expected != n || wrong != 0))
    throw std::runtime_error("remote stream: " + std::to_string(expected) + " of " + std::to_string(n) + " messages, " +
                             std::to_string(wrong) + " out of order");
  from_rank_1(w, 0); // rank 1's sink has every message
  stream_time t{seconds_since(t0), 0};
  if (slots != nullptr) *slots = p.cross_rank_links().at(0).ring->capacity();
  t.steady = from_rank_1(w, arrivals.steady_seconds(n));
  return t;
}

void add_stream(std::vector<result>& results, std::size_t bytes, std::uint32_t n, stream_time mpi, stream_time ours) {
  result r{"remote.stream", {{"bytes", std::to_string(bytes)}, {"messages", std::to_string(n)}}, {}};
  add_stream_metrics(r, n, bytes, ours.total);
  const double total_bytes = static_cast<double>(n) * static_cast<double>(bytes);
  r.metrics["mpi_msgs_per_s"] = n / mpi.total;
  r.metrics["mpi_bytes_per_s"] = total_bytes / mpi.total;
  r.metrics["ratio_vs_mpi"] = mpi.total / ours.total;
  r.metrics["steady_bytes_per_s"] = total_bytes / ours.steady;
  r.metrics["mpi_steady_bytes_per_s"] = total_bytes / mpi.steady;
  r.metrics["steady_ratio_vs_mpi"] = mpi.steady / ours.steady;
  std::cerr << "  " << bytes << " B x " << n << ": ringpipe " << n / ours.total / 1e6 << " M msgs/s ("
            << total_bytes / ours.total / 1e9 << " GB/s), raw MPI " << n / mpi.total / 1e6
            << " M msgs/s: " << mpi.total / ours.total << "x; steady, on the receiving rank: ringpipe "
            << total_bytes / ours.steady / 1e9 << " GB/s, raw MPI " << total_bytes / mpi.steady / 1e9
            << " GB/s: " << mpi.steady / ours.steady << "x\n";
  results.push_back(std::move(r));
}

} // namespace

int remote_topic(int& argc, char**& argv, const settings& s, const std::function<bool(const char*)>& selected,
                 std::vector<result>& results) {
  mpi::world w(argc, argv);
  if (w.size() != 2)
    throw std::runtime_error("topic remote runs on 2 ranks (mpirun -n 2), not " + std::to_string(w.size()));
  runtime rt;
  if (w.rank() == 0) std::cerr << "topic remote: " << w.describe() << " and rank 1\n";
  if (selected("remote.latency")) {
    const std::uint32_t samples = s.quick ? 2000 : 20000;
    const auto raw = mpi_one_way_us(w, samples);
    const auto ours = ringpipe_one_way_us(w, rt, samples);
    if (w.rank() == 0) {
      result r{"remote.latency", {{"bytes", "8"}, {"samples", std::to_string(samples)}}, {}};
      r.metrics["one_way_p50_us"] = percentile(ours, 0.50);
      r.metrics["one_way_p99_us"] = percentile(ours, 0.99);
      r.metrics["mpi_one_way_p50_us"] = percentile(raw, 0.50);
      r.metrics["mpi_one_way_p99_us"] = percentile(raw, 0.99);
      std::cerr << "  8 B one way: ringpipe p50 " << percentile(ours, 0.5) << " us, p99 " << percentile(ours, 0.99)
                << " us; raw MPI p50 " << percentile(raw, 0.5) << " us, p99 " << percentile(raw, 0.99) << " us\n";
      results.push_back(std::move(r));
    }
  }
  if (selected("remote.stream")) {
    const auto q = [&](std::uint32_t full) { return s.quick ? full / 10 : full; };
    const std::uint32_t n16 = q(2'000'000), n4k = q(200'000), n1m = q(2'000);
    const auto m16 = mpi_stream_seconds(w, 16, n16);
    const auto r16 = ringpipe_stream_seconds<16>(w, rt, n16, 65536);
    const auto m4k = mpi_stream_seconds(w, 4096, n4k);
    const auto r4k = ringpipe_stream_seconds<4096>(w, rt, n4k, 4096);
    // 1 MiB through the pipeline's default rings, also against raw MPI through as many buffers in
    // turn as a ring has slots (the memory the stream touches) and through 16 (memory beyond
    // the caches).
    std::uint32_t slots = 0;
    const auto m1m = mpi_stream_seconds(w, 1 << 20, n1m);
    const auto r1m = ringpipe_stream_seconds<(1 << 20)>(w, rt, n1m, 0, &slots);
    const auto m1m_ring = mpi_stream_seconds(w, 1 << 20, n1m, slots);
    const auto m1m_16 = mpi_stream_seconds(w, 1 << 20, n1m, 16);
    // ringpipe's big rings are on huge pages (ring.cpp): raw MPI through one buffer on them too.
    const auto m1m_huge = mpi_stream_seconds(w, 1 << 20, n1m, 1, true);
    if (w.rank() == 0) {
      add_stream(results, 16, n16, m16, r16);
      add_stream(results, 4096, n4k, m4k, r4k);
      add_stream(results, 1 << 20, n1m, m1m, r1m);
      auto& big = results.back();
      big.params["ring_slots"] = std::to_string(slots);
      const double mib = n1m * double(1 << 20);
      big.metrics["mpi_ring_buffers_bytes_per_s"] = mib / m1m_ring.total;
      big.metrics["ratio_vs_mpi_ring_buffers"] = m1m_ring.total / r1m.total;
      big.metrics["steady_ratio_vs_mpi_ring_buffers"] = m1m_ring.steady / r1m.steady;
      std::cerr << "  1 MiB against raw MPI through " << slots << " buffers, as many as the ring's slots ("
                << mib / m1m_ring.total / 1e9 << " GB/s): " << m1m_ring.total / r1m.total << "x, steady "
                << m1m_ring.steady / r1m.steady << "x\n";
      big.metrics["mpi_16_buffers_bytes_per_s"] = mib / m1m_16.total;
      big.metrics["ratio_vs_mpi_16_buffers"] = m1m_16.total / r1m.total;
      big.metrics["steady_ratio_vs_mpi_16_buffers"] = m1m_16.steady / r1m.steady;
      std::cerr << "  1 MiB against raw MPI through 16 buffers (" << mib / m1m_16.total / 1e9
                << " GB/s): " << m1m_16.total / r1m.total << "x, steady " << m1m_16.steady / r1m.steady << "x\n";
      big.metrics["mpi_huge_pages_bytes_per_s"] = mib / m1m_huge.total;
      big.metrics["ratio_vs_mpi_huge_pages"] = m1m_huge.total / r1m.total;
      big.metrics["steady_ratio_vs_mpi_huge_pages"] = m1m_huge.steady / r1m.steady;
      std::cerr << "  1 MiB against raw MPI through one buffer on huge pages (" << mib / m1m_huge.total / 1e9
                << " GB/s): " << m1m_huge.total / r1m.total << "x, steady " << m1m_huge.steady / r1m.steady << "x\n";
    }
  }
  return w.rank();
}

} // namespace ringpipe::bench
