// ringpipe-bench: throughput and latency of ringpipe's transports, each measured in the same
// process and run as the baselines it is compared to. Topics live in files of their own.
//   ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose] [--live] [--cpu-devices-own-cores]
//   mpirun -n 2 ringpipe-bench --json FILE     (topic remote, between two ranks, alone)

#include "../tool_output.hpp"
#include "bench.hpp"

#include <ringpipe/detail/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <sstream>
#include <string_view>

#include <unistd.h>

using namespace ringpipe;
using namespace ringpipe::bench;

namespace {

std::string json_of(const std::vector<result>& results) {
  std::ostringstream f;
  f << "{\"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    f << (i ? "," : "") << "\n  {\"name\": " << detail::json_string(r.name) << ", \"params\": {";
    bool first = true;
    for (const auto& [k, v] : r.params)
      f << (first ? "" : ", ") << detail::json_string(k) << ": " << detail::json_string(v), first = false;
    f << "}, \"metrics\": {";
    first = true;
    for (const auto& [k, v] : r.metrics)
      f << (first ? "" : ", ") << detail::json_string(k) << ": " << detail::json_number(v), first = false;
    f << "}}";
  }
  f << "\n]}\n";
  return f.str();
}

// Writes the results file; 0, or 1 (the reason on stderr) when it could not be written whole.
int write_json(const std::string& path, const std::vector<result>& results) {
  const std::string why = tools::write_whole(path, json_of(results));
  if (why.empty()) return 0;
  std::cerr << "ringpipe-bench: " << why << "\n";
  return 1;
}

// Runs one topic; its rows that do not record how far apart the cores were as they ran (versus
// does, per row) get the larger of the round trips before and after the topic (cores_round_trip.cpp).
void run_topic(bench_context& c, void (*topic)(bench_context&)) {
  const std::size_t first = c.results.size();
  const double before = cores_round_trip_ns();
  topic(c);
  if (c.results.size() == first) return;
  const double around = std::max(before, cores_round_trip_ns());
  for (std::size_t i = first; i < c.results.size(); ++i)
    c.results[i].metrics.emplace("cores_round_trip_ns", around);
}

// Every name a topic passes to `selected`: --filter is checked against them before anything runs.
// clang-format off
constexpr std::array<std::string_view, 21> benchmark_names{
    "host_to_kernel", "host_to_kernel.relaunch_baseline", "spsc_baseline", "ring_wake", "round_group",
    "kernel_to_kernel", "cross_device", "pipeline_latency", "asio_baseline", "versus", "barrier", "links",
    "collectives", "scaling", "work_stealing", "farm_items", "replica_exchange", "idle",
    "remote", "remote.latency", "remote.stream"};
// clang-format on

// The filter as a regular expression, or why it cannot be one or matches no benchmark.
std::optional<std::regex> parse_filter(const std::string& filter, std::string& why) {
  std::regex want;
  try {
    want = std::regex(filter);
  } catch (const std::regex_error& e) {
    why = "--filter '" + filter + "' is not a regular expression: " + e.what();
    return std::nullopt;
  }
  const auto matches = [&](std::string_view name) { return std::regex_search(name.begin(), name.end(), want); };
  if (std::ranges::any_of(benchmark_names, matches)) return want;
  why = "--filter '" + filter + "' matches no benchmark; it is searched for in:";
  for (const auto name : benchmark_names)
    why.append(" ").append(name);
  return std::nullopt;
}

} // namespace

// What --help says: options, topics (the names --filter matches), exit codes.
const char* const usage = R"(usage: ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose] [--live]
                      [--cpu-devices-own-cores]
       mpirun -n 2 ringpipe-bench --json FILE [--filter REGEX] [--quick]
  Measures ringpipe's transports beside the baselines they are compared to, in the same run, and
  writes every result to FILE (JSON); progress and ratios go to stderr. Each result (but those of
  remote) records cores_round_trip_ns, a cache line's round trip between two of the process's
  cores as it ran: a virtual machine's vCPUs move near and far apart, and throughput with them.
  --filter REGEX  runs the benchmarks whose name it matches, searched for in the names below
                  (default: all); refused if it matches none of them
  --quick         a tenth of the messages and samples
  --verbose       prints each pipeline's metrics table
  --live          draws each pipeline's rates per link on stderr while it runs, as lines when
                  stderr is not a terminal (on a terminal the table is drawn without it)
  --cpu-devices-own-cores
                  tells scaling the CPU devices have cores of their own, which parallel_for
                  otherwise decides from their worker threads against the host's cores (e.g. on
                  2 cores POCL_MAX_PTHREAD_COUNT=1 LP_NUM_THREADS=1, one PoCL and one rusticl
                  device, is found to be so)
topics (names --filter matches):
  host_to_kernel, host_to_kernel.relaunch_baseline, spsc_baseline   rings into one kernel
  ring_wake       a pop woken by a host push after quiet, against a condition variable
  round_group     a round's group of 64 against the device's default (8 on PoCL)
  kernel_to_kernel, cross_device, pipeline_latency, asio_baseline   pipelines, kernel to kernel
  versus          against a hand-written batched OpenCL program
  barrier         barrier phases against std::barrier
  links           the copy bandwidth matrix against memcpy
  collectives     all-reduce against gathering to the host
  scaling         parallel_for on 1, 2 and 3 devices; split arrays against host arrays
  work_stealing   a farm, stealing against static dealing
  farm_items      a farm of cheap items against one kernel (the farm's host cost per item)
  replica_exchange  resident replicas: an exchange at a barrier against 100 sweeps
  idle            a started pipeline's CPU time while nothing comes, against none started
  remote.latency, remote.stream   between two MPI ranks against raw MPI (under mpirun -n 2 only)
exit codes: 0 done; 1 a benchmark failed (the reason on stderr; FILE holds what ran before it)
            or FILE could not be written; 2 bad arguments (an unknown option, a --filter that is
            no regular expression or matches no benchmark, a FILE that cannot be written).
)";

int main(int argc, char** argv) {
  std::string json_path, filter = ".*";
  settings s;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      s.quick = true;
    else if (!std::strcmp(argv[i], "--verbose"))
      s.verbose = true;
    else if (!std::strcmp(argv[i], "--live"))
      s.live = true;
    else if (!std::strcmp(argv[i], "--cpu-devices-own-cores"))
      s.cpu_devices_own_cores = true;
    else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << usage;
      return 0;
    } else {
      std::cerr << "ringpipe-bench: unknown argument '" << argv[i] << "'\n" << usage;
      return 2;
    }
  }
  if (json_path.empty()) {
    std::cerr << "ringpipe-bench: --json FILE is required\n" << usage;
    return 2;
  }
  s.live = s.live || isatty(STDERR_FILENO) != 0;
  std::string why = tools::cannot_write(json_path);
  const auto parsed = why.empty() ? parse_filter(filter, why) : std::nullopt;
  if (!parsed) {
    std::cerr << "ringpipe-bench: " << why << "\n";
    return 2;
  }
  const std::regex& want = *parsed;
  const auto selected = [&](const char* name) {
    if (std::ranges::find(benchmark_names, std::string_view(name)) == benchmark_names.end())
      throw std::logic_error(std::string("benchmark '") + name + "' is missing from main.cpp's benchmark_names");
    return std::regex_search(name, want);
  };
  // Started by mpirun (Open MPI says so in the environment): topic remote alone, between ranks.
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  std::vector<result> results;
  try {
    if (under_mpirun) {
#if defined(RINGPIPE_BENCH_REMOTE)
      return remote_topic(argc, argv, s, selected, results) == 0 ? write_json(json_path, results) : 0;
#else
      std::cerr << "ringpipe-bench: built without MPI (RINGPIPE_WITH_MPI=OFF): no topic remote\n";
      return 2;
#endif
    }
    if (selected("remote"))
      std::cerr << "topic remote: not measured (run it between two ranks: mpirun -n 2 ringpipe-bench --json FILE)\n";
    runtime rt;
    const auto& dev = rt.device_at(0);
    std::cerr << "ringpipe-bench on " << dev.label() << (s.quick ? " (quick)" : "") << "\n";
    bench_context c{rt, dev, s, results, selected};
    for (auto* topic :
         {host_to_kernel_topic, kernel_links_topic, pipeline_topic, versus_topic, barrier_topic, links_topic,
          collectives_topic, scaling_topic, work_stealing_topic, farm_items_topic, replica_exchange_topic, idle_topic})
      run_topic(c, topic);
    return write_json(json_path, results);
  } catch (const std::exception& e) {
    std::cerr << "ringpipe-bench: " << e.what() << "\n";
    // What was measured before the failure is kept.
    if (!results.empty() && write_json(json_path, results) == 0)
      std::cerr << "ringpipe-bench: " << json_path << " holds the " << results.size()
                << (results.size() == 1 ? " result" : " results") << " measured before it\n";
    return 1;
  }
}
