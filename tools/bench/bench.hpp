#pragma once
// What every ringpipe-bench topic shares: results, settings, timing helpers, and the topic list.
// A new benchmark goes into a file of its own (one topic) and one line of main.cpp.

#include <ringpipe/ringpipe.hpp>

#include <test_message.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ringpipe::bench {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct result {
  std::string name;
  std::map<std::string, std::string> params;
  std::map<std::string, double> metrics;
};

struct settings {
  bool quick = false;
  bool verbose = false; // print each pipeline's metrics table
  /// Draw each pipeline's live view on stderr (--live; on by itself when stderr is a terminal).
  bool live = false;
  /// CPU devices were each given cores of their own (--cpu-devices-own-cores): parallel_for and
  /// farms run them at once instead of as one pool of the host's cores.
  bool cpu_devices_own_cores = false;
  std::uint32_t stream_messages() const { return quick ? 100'000 : 1'000'000; }
  std::uint32_t rtt_samples() const { return quick ? 2'000 : 20'000; }
};

/// A benchmark pipeline's live view on stderr (settings::live) attached to `options`, or none;
/// erased when it ends, so that the benchmark's result line takes its place. Declare it before the
/// pipeline, so that it outlives it.
inline std::unique_ptr<live_view> watch(const settings& s, pipeline_options& options) {
  if (!s.live) return nullptr;
  auto view = std::make_unique<live_view>(live_view_options{.title = options.name, .out = stderr, .keep = false});
  view->attach(options);
  return view;
}

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
inline double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
inline void add_stream_metrics(result& r, std::uint32_t n, std::size_t bytes, double secs) {
  r.metrics["msgs_per_s"] = n / secs;
  r.metrics["bytes_per_s"] = static_cast<double>(n) * static_cast<double>(bytes) / secs;
}
inline void add_rtt_metrics(result& r, const std::vector<double>& us) {
  r.metrics["rtt_p50_us"] = percentile(us, 0.50);
  r.metrics["rtt_p99_us"] = percentile(us, 0.99);
}

/// The round trip of a cache line between two of this process's threads spinning on two cores, in
/// ns, measured for `for_how_long` (cores_round_trip.cpp: why throughput rows record it); 0 where
/// the process has one core.
double cores_round_trip_ns(std::chrono::milliseconds for_how_long = 20ms);

/// What a topic runs with; `selected(name)` says whether --filter asks for benchmark `name`.
struct bench_context {
  runtime& rt;
  const device& dev; ///< device 0, where single-device benchmarks run
  const settings& s;
  std::vector<result>& results;
  std::function<bool(const char*)> selected;
};

// The topics, one file each.
void host_to_kernel_topic(bench_context& c);   // host_to_kernel.cpp: rings into one kernel, baselines
void kernel_links_topic(bench_context& c);     // kernel_links.cpp: kernel to kernel, across devices
void pipeline_topic(bench_context& c);         // pipelines.cpp: two-stage pipelines, Asio baseline
void versus_topic(bench_context& c);           // versus.cpp: against a hand-written batched program
void barrier_topic(bench_context& c);          // barriers.cpp: barrier phases against std::barrier
void links_topic(bench_context& c);            // links.cpp: the copy bandwidth matrix against memcpy
void collectives_topic(bench_context& c);      // collectives.cpp: all-reduce against gathering to the host
void scaling_topic(bench_context& c);          // scaling.cpp: parallel_for on 1, 2, 3 devices
void work_stealing_topic(bench_context& c);    // work_stealing.cpp: a farm, stealing against static dealing
void farm_items_topic(bench_context& c);       // farm_items.cpp: a farm of cheap items against one kernel
void replica_exchange_topic(bench_context& c); // replica_exchange.cpp: resident replicas, exchanges at barriers
void idle_topic(bench_context& c);             // idle.cpp: what a started pipeline costs while nothing comes
#if defined(RINGPIPE_BENCH_REMOTE)
/// remote.cpp: between two MPI ranks, against raw MPI. Under mpirun only, alone; returns the rank.
int remote_topic(int& argc, char**& argv, const settings& s, const std::function<bool(const char*)>& selected,
                 std::vector<result>& results);
#endif

} // namespace ringpipe::bench
