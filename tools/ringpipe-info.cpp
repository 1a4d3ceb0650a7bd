// ringpipe-info: every OpenCL device ringpipe can use, what it can do, and how stages on two
// devices would be linked. `--json` prints the same as JSON; `--measure` adds the copy bandwidth
// matrix between the host and every device.

#include "tool_output.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/copy_bandwidth.hpp>
#include <ringpipe/cpu_cores.hpp>
#include <ringpipe/detail/json.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/topology.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

using namespace ringpipe;
using detail::json_string;

namespace {

std::string modes_text(const device_info& i, const char* sep) {
  std::string s;
  for (auto m : i.modes)
    s += (s.empty() ? "" : sep) + std::string(to_string(m));
  return s;
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
const char* yes(bool b) { return b ? "yes" : "no"; }

// The hard limit, and what a mode chosen automatically may take of it (the pool's own rule,
// occupancy::persistent_room, with nothing running): "2" alone read as two resident kernels.
std::string budget_text(const device& d) {
  const auto& i = d.info();
  if (i.persistent_budget == 0) return "0 (no kernel stays resident on this device)";
  return std::to_string(i.persistent_budget) + " in pool '" + i.budget_pool + "'; chosen automatically, " +
         std::to_string(d.budget().persistent_room()) +
         " at most (one worker kept free for parked and batched kernels)";
}

/// Every CPU device's workers against the cores this process may run on (as a runtime counts them).
cpu_core_use core_use(const topology& topo) {
  std::vector<const device*> all;
  for (const auto& d : topo.devices())
    all.push_back(&d);
  return cpu_devices_core_use(all, static_cast<unsigned>(detail::affinity_cpus()));
}

void print_table(const topology& topo) {
  for (const auto& d : topo.devices()) {
    const auto& i = d.info();
    std::cout << "device " << d.index() << ": " << i.name << "\n"
              << "  platform          " << i.platform << "\n"
              << "  type              " << to_string(i.type) << ", " << i.vendor << "\n"
              << "  version           " << i.version << " (driver " << i.driver_version << ")\n"
              << "  compute units     " << i.compute_units << "\n"
              << (i.type == device_type::cpu
                      ? "  worker threads    " + std::to_string(i.worker_threads) + " (host threads)\n"
                      : std::string())
              << "  global / local    " << mib(i.global_memory) << " / " << (i.local_memory >> 10) << " KiB\n"
              << "  max work-group    " << i.max_work_group_size << "\n"
              << "  svm               coarse " << yes(i.svm.coarse) << ", fine buffer " << yes(i.svm.fine_buffer)
              << ", fine system " << yes(i.svm.fine_system) << ", atomics " << yes(i.svm.atomics) << "\n"
              << "  atomics           acquire/release " << yes(i.c11_atomics) << ", 64-bit " << yes(i.atomics_64)
              << "\n"
              << "  exec timeout      " << (i.execution_timeout ? yes(*i.execution_timeout) : "not reported") << "\n"
              << "  ring-kernel modes " << modes_text(i, ", ") << "\n"
              << "  persistent budget " << budget_text(d) << "\n";
  }
  std::cout << "links (row: from, column: to)\n      ";
  for (std::size_t j = 0; j < topo.size(); ++j)
    std::printf("%-8zu", j);
  std::cout << "\n";
  for (std::size_t i = 0; i < topo.size(); ++i) {
    std::printf("  %-4zu", i);
    for (std::size_t j = 0; j < topo.size(); ++j)
      std::printf("%-8s", std::string(to_string(topo.link(i, j))).c_str());
    std::cout << "\n";
  }
  if (const auto cores = core_use(topo); cores.pools != 0) std::cout << "CPU devices: " << cores.describe() << "\n";
  for (const auto& f : topo.failures())
    std::cout << "platform '" << f.platform << "' failed: " << f.what << "\n";
}

void print_json(const topology& topo) {
  std::ostringstream o;
  o << "{\n  \"devices\": [";
  for (const auto& d : topo.devices()) {
    const auto& i = d.info();
    o << (d.index() ? "," : "") << "\n    {\"index\": " << d.index() << ", \"name\": " << json_string(i.name)
      << ", \"platform\": " << json_string(i.platform) << ", \"type\": " << json_string(to_string(i.type))
      << ", \"vendor\": " << json_string(i.vendor) << ", \"version\": " << json_string(i.version)
      << ", \"compute_units\": " << i.compute_units << ", \"worker_threads\": " << i.worker_threads
      << ", \"global_memory\": " << i.global_memory << ", \"local_memory\": " << i.local_memory
      << ", \"max_work_group_size\": " << i.max_work_group_size << ", \"svm\": {\"coarse\": " << std::boolalpha
      << i.svm.coarse << ", \"fine_buffer\": " << i.svm.fine_buffer << ", \"fine_system\": " << i.svm.fine_system
      << ", \"atomics\": " << i.svm.atomics << "}"
      << ", \"atomics_64\": " << i.atomics_64 << ", \"c11_atomics\": " << i.c11_atomics
      << ", \"execution_timeout\": " << (i.execution_timeout ? (*i.execution_timeout ? "true" : "false") : "null")
      << ", \"modes\": [";
    for (std::size_t m = 0; m < i.modes.size(); ++m)
      o << (m ? ", " : "") << json_string(to_string(i.modes[m]));
    o << "], \"persistent_budget\": " << i.persistent_budget << ", \"budget_pool\": " << json_string(i.budget_pool)
      << "}";
  }
  o << "\n  ],\n  \"links\": [";
  bool first = true;
  for (std::size_t i = 0; i < topo.size(); ++i)
    for (std::size_t j = 0; j < topo.size(); ++j) {
      o << (first ? "" : ",") << "\n    {\"from\": " << i << ", \"to\": " << j
        << ", \"kind\": " << json_string(to_string(topo.link(i, j))) << "}";
      first = false;
    }
  const auto cores = core_use(topo);
  o << "\n  ],\n  \"cpu_cores\": {\"worker_threads\": " << cores.worker_threads << ", \"pools\": " << cores.pools
    << ", \"host_cores\": " << cores.host_cores << ", \"shared\": " << (cores.shared() ? "true" : "false") << "}";
  o << ",\n  \"platform_failures\": [";
  for (std::size_t f = 0; f < topo.failures().size(); ++f)
    o << (f ? ", " : "") << "{\"platform\": " << json_string(topo.failures()[f].platform)
      << ", \"error\": " << json_string(topo.failures()[f].what) << "}";
  o << "]\n}\n";
  std::cout << o.str();
}

} // namespace

const char* const usage =
    "usage: ringpipe-info [--json] [--measure] [--filter TEXT]\n"
    "  Lists OpenCL devices, their capabilities, ring-kernel modes and budgets, and the\n"
    "  link kind between every pair. TEXT keeps devices whose \"platform: name\" contains it.\n"
    "  --measure also times copies between the host and every device (4 KiB, 1 MiB, 64 MiB)\n"
    "  beside a host memcpy of the same size (about a minute; not with --json).\n"
    "exit codes: 0 listed, 1 no device, an OpenCL error or output that could not be written (the\n"
    "  reason on stderr), 2 bad arguments.\n";

int main(int argc, char** argv) {
  bool json = false, measure = false;
  discovery_options options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--measure") == 0) {
      measure = true;
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      options.device_filter = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << usage;
      return 0;
    } else {
      std::cerr << "ringpipe-info: unknown argument '" << argv[i] << "'\n" << usage;
      return 2;
    }
  }
  if (json && measure) {
    std::cerr << "ringpipe-info: --measure prints a table, not JSON: use it without --json\n" << usage;
    return 2;
  }
  try {
    auto topo = topology::discover(options);
    json ? print_json(topo) : print_table(topo);
    if (measure) {
      runtime rt(std::move(topo));
      std::cout << "\nmeasuring copies (" << rt.devices().size() + 1 << " ends, 3 sizes)...\n" << std::flush;
      std::cout << copy_bandwidth_table(rt, measure_copy_bandwidth(rt));
    }
    if (!tools::stdout_written()) {
      std::cerr << "ringpipe-info: cannot write to standard output\n";
      return 1;
    }
    return 0;
  } catch (const ringpipe::error& e) {
    std::cerr << "ringpipe-info: " << e.what() << "\n";
    return 1;
  }
}
