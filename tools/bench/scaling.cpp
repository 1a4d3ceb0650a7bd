// Topic `scaling`: a compute-bound parallel_for on 1, 2 and 3 devices (the first k of the
// runtime's). Efficiency = throughput on k devices / the sum of each device's throughput alone,
// all measured in this run. On a CPU-only machine every device runs on the same host cores, so
// the sum of single-device throughputs counts those cores once per device: the speedup over the
// best single device is reported beside it. `scaling.resident`: a light kernel run again and again
// over data that stays on the devices (split arrays) against the same runs over host arrays (the
// data copied in and out each run), with the same block partition, on the same devices. Whether
// the CPU devices run chunks at once is parallel_for's to decide (cpu_cores.hpp), unless
// --cpu-devices-own-cores says they have cores of their own.

#include "bench.hpp"

namespace ringpipe::bench {
namespace {

const char* const work_source = R"(
__kernel void work(__global const float* x, __global float* y, uint steps) {
  const size_t i = get_global_id(0);
  float v = x[i];
  for (uint k = 0; k < steps; ++k) v = v * 0.9999f + 0.5f;
  y[i] = v;
}
)";

/// Items per second: the median of `runs` runs after one warm-up (builds, first-launch compiles).
double throughput(runtime& rt, const std::vector<std::size_t>& devices, std::size_t n, std::size_t runs,
                  parallel_for_report* last, bool own_cores) {
  parallel_for_options o;
  o.name = "scaling";
  o.devices = devices;
  if (own_cores) o.cpu_devices_share_cores = false; // else parallel_for decides (cpu_cores.hpp)
  parallel_kernel k(rt, {work_source, "work"}, o);
  std::vector<float> x(n, 1.0f), y(n);
  const cl_uint steps = 256;
  k.run(n, input(x), output(y), steps);
  std::vector<double> rates;
  for (std::size_t r = 0; r < runs; ++r) {
    const auto t0 = clock_type::now();
    auto report = k.run(n, input(x), output(y), steps);
    rates.push_back(static_cast<double>(n) / seconds_since(t0));
    if (last) *last = std::move(report);
  }
  return percentile(rates, 0.5);
}

/// Items per second of `work` with 16 steps over data that stays on the devices (split) or
/// moves in and out each run (host arrays), block partition, median of `runs`.
double resident_throughput(runtime& rt, const std::vector<std::size_t>& devices, std::size_t n, std::size_t runs,
                           bool split) {
  parallel_for_options o;
  o.name = split ? "split arrays" : "host arrays";
  o.devices = devices;
  o.partition = block_partition{};
  parallel_kernel k(rt, {work_source, "work"}, o);
  std::vector<float> host_x(n, 1.0f), host_y(n);
  split_array<float> x(rt, n, "x", {.devices = devices}), y(x.layout(), "y");
  x.write(host_x);
  const cl_uint steps = 16;
  const auto once = [&] { return split ? k.run(n, x, y, steps) : k.run(n, input(host_x), output(host_y), steps); };
  once();
  std::vector<double> rates;
  for (std::size_t r = 0; r < runs; ++r) {
    const auto t0 = clock_type::now();
    once();
    rates.push_back(static_cast<double>(n) / seconds_since(t0));
  }
  if (split) y.read(host_y);
  for (std::size_t i = 0; i < n; i += 4099)
    if (host_y[i] != host_y[0])
      throw error(errc::invalid_argument, "scaling.resident: wrong result at " + std::to_string(i));
  return percentile(rates, 0.5);
}

void resident_rows(bench_context& c, std::size_t n, std::size_t runs, std::size_t count) {
  for (std::size_t k = 1; k <= count; ++k) {
    std::vector<std::size_t> devices;
    for (std::size_t d = 0; d < k; ++d)
      devices.push_back(d);
    const double host = resident_throughput(c.rt, devices, n, runs, false);
    const double split = resident_throughput(c.rt, devices, n, runs, true);
    result r{"scaling.resident", {{"devices", std::to_string(k)}, {"items", std::to_string(n)}}, {}};
    r.metrics["host_arrays_items_per_s"] = host;
    r.metrics["split_arrays_items_per_s"] = split;
    r.metrics["split_over_host"] = split / host;
    c.results.push_back(r);
    std::fprintf(stderr, "  resident %zu device(s): split arrays %10.3g items/s | host arrays %10.3g | x%.2f\n", k,
                 split, host, split / host);
  }
}

/// Whether the devices' sum alone counts the same cores more than once, which efficiency then
/// cannot reach: two CPU devices of one worker pool, or pools whose workers outnumber the host's
/// cores (unless told they have cores of their own). A GPU computes on its own.
bool devices_share_cores(runtime& rt, std::size_t count, bool told_own_cores) {
  std::vector<const device*> cpus;
  for (std::size_t d = 0; d < count; ++d)
    if (rt.device_at(d).info().type == device_type::cpu) cpus.push_back(&rt.device_at(d));
  if (told_own_cores || cpus.size() < 2) return false;
  const auto use = cpu_devices_core_use(cpus, rt.host_cores());
  return use.pools < cpus.size() || use.shared();
}

} // namespace

void scaling_topic(bench_context& c) {
  if (!c.selected("scaling")) return;
  const std::size_t n = c.s.quick ? (std::size_t{1} << 20) : (std::size_t{1} << 22);
  const std::size_t runs = c.s.quick ? 3 : 7;
  const std::size_t count = std::min<std::size_t>(3, c.rt.devices().size());
  std::vector<double> alone;
  for (std::size_t d = 0; d < count; ++d) {
    alone.push_back(throughput(c.rt, {d}, n, runs, nullptr, c.s.cpu_devices_own_cores));
    std::fprintf(stderr, "  scaling alone  %-46.46s %10.3g items/s\n", c.rt.device_at(d).label().c_str(), alone.back());
  }
  for (std::size_t k = 1; k <= count; ++k) {
    std::vector<std::size_t> devices;
    double sum = 0, best = 0;
    for (std::size_t d = 0; d < k; ++d) {
      devices.push_back(d);
      sum += alone[d];
      best = std::max(best, alone[d]);
    }
    parallel_for_report last;
    const double rate = throughput(c.rt, devices, n, runs, &last, c.s.cpu_devices_own_cores);
    result r{"scaling.parallel_for",
             {{"devices", std::to_string(k)},
              {"items", std::to_string(n)},
              {"cpu_devices", last.cpu_cores},
              {"cores", devices_share_cores(c.rt, k, c.s.cpu_devices_own_cores) ? "shared" : "own"}},
             {}};
    r.metrics["items_per_s"] = rate;
    r.metrics["sum_alone_items_per_s"] = sum;
    r.metrics["efficiency"] = rate / sum;
    r.metrics["speedup_over_best_alone"] = rate / best;
    r.metrics["host_cores"] = c.rt.host_cores();
    for (std::size_t d = 0; d < k; ++d)
      r.metrics["share_" + std::to_string(d)] = last.share(d);
    c.results.push_back(r);
    std::fprintf(
        stderr,
        "  scaling %zu device(s): %10.3g items/s | sum alone %10.3g | efficiency %.2f | x%.2f best alone (%s)\n", k,
        rate, sum, rate / sum, rate / best, last.cpu_cores.c_str());
    if (c.s.verbose) std::fprintf(stderr, "%s", last.table().c_str());
  }
  resident_rows(c, n, runs, count);
}

} // namespace ringpipe::bench
