// Topic `collectives`: all-reduce (sum of floats) on two devices that share memory (PoCL x2) and on
// two that do not (PoCL + rusticl). Small arrays (8 B to 4 KiB): p50 and p99 latency. Large ones
// (1 to 64 MiB): algorithm bandwidth (bytes / time) and bus bandwidth (x 2(n-1)/n, as nccl-tests
// reports it). Baselines in the same run: gather to the host, reduce there, copy back (with the
// same arrays' reads and writes); a host memcpy of the same bytes; and, for the pair without
// shared memory, the bytes read out of the device without it and written back, one command each.

#include "bench.hpp"

#include <boost/asio/use_future.hpp>

#include <cstring>

namespace ringpipe::bench {
namespace {

using arrays = std::vector<device_array<float>>;

arrays make_arrays(runtime& rt, const std::vector<const device*>& on, std::size_t n) {
  arrays a;
  std::vector<float> ones(n, 1.0f);
  for (const auto* d : on) {
    a.emplace_back(rt, *d, n, "bench");
    a.back().write(ones);
  }
  return a;
}

/// What a program without collectives writes: read every part to the host, add, write back.
void host_gather(const arrays& a, std::vector<std::vector<float>>& staging) {
  std::vector<std::future<void>> reads, writes;
  for (std::size_t d = 0; d < a.size(); ++d)
    reads.push_back(a[d].async_read(std::span<float>(staging[d]), boost::asio::use_future));
  for (auto& r : reads)
    r.get();
  for (std::size_t d = 1; d < a.size(); ++d)
    for (std::size_t i = 0; i < staging[0].size(); ++i)
      staging[0][i] += staging[d][i];
  for (const auto& x : a)
    writes.push_back(x.async_write(std::span<const float>(staging[0]), boost::asio::use_future));
  for (auto& w : writes)
    w.get();
}

template <class F> std::vector<double> times_us(std::size_t n, F&& f) {
  f();
  std::vector<double> us;
  for (std::size_t i = 0; i < n; ++i) {
    const auto t0 = clock_type::now();
    f();
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return us;
}

void pair_rows(bench_context& c, const std::string& pair, const std::vector<const device*>& on) {
  const double ranks = static_cast<double>(on.size());
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{64}, std::size_t{512}, std::size_t{4096}}) {
    const std::size_t n = bytes / sizeof(float);
    auto a = make_arrays(c.rt, on, n);
    std::vector<std::vector<float>> staging(on.size(), std::vector<float>(n));
    const std::size_t samples = c.s.quick ? 300 : 3000;
    const auto ours = times_us(samples, [&] { all_reduce(a, reduction<float>::sum()); });
    const auto base = times_us(samples, [&] { host_gather(a, staging); });
    c.results.push_back({"collectives.all_reduce_latency",
                         {{"pair", pair}, {"bytes", std::to_string(bytes)}},
                         {{"p50_us", percentile(ours, 0.5)},
                          {"p99_us", percentile(ours, 0.99)},
                          {"host_gather_p50_us", percentile(base, 0.5)},
                          {"host_gather_p99_us", percentile(base, 0.99)},
                          {"speedup_p50", percentile(base, 0.5) / percentile(ours, 0.5)}}});
    std::fprintf(stderr, "  all_reduce %-16s %6zu B: p50 %8.2f us p99 %8.2f us | host gather p50 %8.2f us (%.1fx)\n",
                 pair.c_str(), bytes, percentile(ours, 0.5), percentile(ours, 0.99), percentile(base, 0.5),
                 percentile(base, 0.5) / percentile(ours, 0.5));
  }
  for (const std::size_t mib : {1u, 4u, 16u, 64u}) {
    const std::size_t bytes = mib << 20, n = bytes / sizeof(float);
    auto a = make_arrays(c.rt, on, n);
    std::vector<std::vector<float>> staging(on.size(), std::vector<float>(n));
    // A 1 MiB call takes tens of microseconds: a median of 15 moved by 20% between runs.
    const std::size_t samples = c.s.quick ? 3 : (mib >= 16 ? 5 : 101);
    const double ours = percentile(times_us(samples, [&] { all_reduce(a, reduction<float>::sum()); }), 0.5);
    const double base = percentile(times_us(samples, [&] { host_gather(a, staging); }), 0.5);
    std::vector<std::byte> x(bytes, std::byte{1}), y(bytes);
    const double copy = percentile(times_us(samples, [&] { std::memcpy(y.data(), x.data(), bytes); }), 0.5);
    const double algbw = static_cast<double>(bytes) / ours / 1e3, busbw = algbw * 2 * (ranks - 1) / ranks;
    const double memcpy_bw = static_cast<double>(bytes) / copy / 1e3;
    result r{"collectives.all_reduce_bandwidth",
             {{"pair", pair}, {"bytes", std::to_string(bytes)}},
             {{"time_us", ours},
              {"algbw_gb_per_s", algbw},
              {"busbw_gb_per_s", busbw},
              {"host_gather_time_us", base},
              {"memcpy_gb_per_s", memcpy_bw},
              {"busbw_over_memcpy", busbw / memcpy_bw}}};
    std::string raw_text;
    for (const auto* d : on)
      if (!reaches_shared_memory(*d)) {
        // The staged end's own bytes read out once and written back once, one command each: what
        // any all-reduce through host memory must at least do on that device.
        std::vector<float> host(n);
        const auto& x = a.back();
        const double read_us = percentile(
            times_us(samples, [&] { x.async_read(std::span<float>(host), boost::asio::use_future).get(); }), 0.5);
        const double write_us = percentile(
            times_us(samples, [&] { x.async_write(std::span<const float>(host), boost::asio::use_future).get(); }),
            0.5);
        const double read_bw = static_cast<double>(bytes) / read_us / 1e3;
        const double write_bw = static_cast<double>(bytes) / write_us / 1e3;
        const double round_trip_bw = static_cast<double>(bytes) / (read_us + write_us) / 1e3;
        r.metrics["raw_read_gb_per_s"] = read_bw;
        r.metrics["raw_write_gb_per_s"] = write_bw;
        r.metrics["raw_read_then_write_gb_per_s"] = round_trip_bw;
        r.metrics["busbw_over_raw_read_then_write"] = busbw / round_trip_bw;
        char text[160];
        std::snprintf(text, sizeof text, " | raw read %.2f write %.2f read+write %.2f GB/s", read_bw, write_bw,
                      round_trip_bw);
        raw_text = text;
      }
    c.results.push_back(r);
    std::fprintf(stderr,
                 "  all_reduce %-16s %3zu MiB: %9.0f us algbw %6.2f busbw %6.2f GB/s | host gather %9.0f us | memcpy "
                 "%6.2f GB/s%s\n",
                 pair.c_str(), mib, ours, algbw, busbw, base, memcpy_bw, raw_text.c_str());
  }
}

} // namespace

void collectives_topic(bench_context& c) {
  if (!c.selected("collectives")) return;
  std::vector<const device*> shared, any_pocl, unshared;
  for (const auto& d : c.rt.devices())
    (reaches_shared_memory(d) ? any_pocl : unshared).push_back(&d);
  if (any_pocl.size() >= 2 && any_pocl[0]->shares_context_with(*any_pocl[1])) shared = {any_pocl[0], any_pocl[1]};
  if (shared.empty())
    std::cerr << "  collectives: no two devices share memory here (POCL_DEVICES=\"pthread pthread\")\n";
  else
    pair_rows(c, "shared", shared);
  if (any_pocl.empty() || unshared.empty())
    std::cerr << "  collectives: no device without shared memory here (RUSTICL_ENABLE=llvmpipe)\n";
  else
    pair_rows(c, "staged", {any_pocl[0], unshared[0]});
}

} // namespace ringpipe::bench
