// ringpipe-bench: throughput and latency of ringpipe's transports, each measured in the same
// process and run as the baselines it is compared to. Topics live in files of their own.
//   ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose]
//   mpirun -n 2 ringpipe-bench --json FILE     (topic remote, between two ranks, alone)

#include "bench.hpp"

#include <ringpipe/detail/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

using namespace ringpipe;
using namespace ringpipe::bench;

namespace {

void write_json(const std::string& path, const std::vector<result>& results) {
  std::ofstream f(path);
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
}

} // namespace

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
    else {
      std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose]\n";
      return 2;
    }
  }
  if (json_path.empty()) {
    std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose]\n";
    return 2;
  }
  const std::regex want(filter);
  const auto selected = [&](const char* name) { return std::regex_search(name, want); };
  // Started by mpirun (Open MPI says so in the environment): topic remote alone, between ranks.
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  try {
    if (under_mpirun) {
#if defined(RINGPIPE_BENCH_REMOTE)
      std::vector<result> results;
      if (remote_topic(argc, argv, s, selected, results) == 0) write_json(json_path, results);
      return 0;
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
    std::vector<result> results;
    bench_context c{rt, dev, s, results, selected};
    host_to_kernel_topic(c);
    kernel_links_topic(c);
    pipeline_topic(c);
    versus_topic(c);
    barrier_topic(c);
    links_topic(c);
    collectives_topic(c);
    scaling_topic(c);
    work_stealing_topic(c);
    write_json(json_path, results);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ringpipe-bench: " << e.what() << "\n";
    return 1;
  }
}
