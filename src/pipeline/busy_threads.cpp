// The threads a pipeline keeps busy under latency (planner.hpp), which the automatic objective
// and residency count against the host's cores, and the io threads it asks of the runtime. On a
// CPU device a kernel's workers are host threads whatever its mode: a resident kernel spins on
// one, a batched one runs every batch on them while a stream flows (a rusticl kernel between a
// source and a sink, uncounted, left the host stages spinning beside llvmpipe's batches:
// 0.62-0.76x inlet/outlet, 0.90-1.06 counted). Also, under throughput, whether kernels on CPU
// devices stay resident beside host stages that pace their sleeps (resident_under_throughput).

#include "planner.hpp"

#include <ringpipe/link.hpp>
#include <ringpipe/occupancy.hpp>

#include <algorithm>
#include <map>

namespace ringpipe::detail {

host_threads count_host_threads(const graph& g, const plan& p, const topology& topo) {
  host_threads t;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    const auto& ps = p.stages[i];
    if (s.kind == stage_kind::inlet || s.kind == stage_kind::outlet) continue; // the application's
    if (!s.is_kernel()) {
      ++t.stages;
      continue;
    }
    if (ps.fused_into) continue;
    if (s.in_edges.size() > 1) ++t.stages;   // a merge
    if (ps.out_edges.size() > 1) ++t.stages; // a split
    if (!reaches_shared_memory(topo[*ps.device])) ++t.copying_proxies;
  }
  for (const auto& l : p.links)
    if (l.mover) ++t.stages;
  return t;
}

std::string describe_host_threads(std::size_t stages, std::size_t copying_proxies,
                                  const std::string& one_thread_reason) {
  const auto count = [](std::size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (!one_thread_reason.empty()) return "runtime threads asked for: one (" + one_thread_reason + ")";
  return "runtime threads asked for: " + std::to_string(stages + copying_proxies) + " (" + count(stages, "host stage") +
         ", " + count(copying_proxies, "kernel") +
         (copying_proxies == 1 ? " whose proxy copies its batches)" : " whose proxies copy their batches)");
}

busy_threads count_busy_threads(const graph& g, const plan& p, const topology& topo, host_capacity host) {
  busy_threads b;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    const auto& ps = p.stages[i];
    if (s.kind == stage_kind::inlet || s.kind == stage_kind::outlet) b.application = true; // no actor
    if (!s.is_kernel() || ps.fused_into) continue;
    const auto& info = topo[*ps.device].info();
    const bool resident = (info.supports(kernel_mode::persistent) || info.supports(kernel_mode::parked)) &&
                          s.kernel_opts.mode != kernel_mode::batched;
    if (info.type == device_type::cpu) ++(resident ? b.kernels : b.batched);
  }
  b.actors = count_host_threads(g, p, topo).stages;
  b.runtime_busy = std::min<std::size_t>(b.actors, host.runtime_threads);
  return b;
}

std::string one_io_thread_reason(const graph& g, const plan& p, const topology& topo, host_capacity host) {
  // Measured on two cores (docs/performance.md, "Farms of CPU devices on one io thread"): the
  // skewed farm with a core per device 1.13 -> 1.10 of its ideal at the median, on two PoCL
  // devices 1.11 -> 1.09; a source, a resident kernel and a sink lost two fifths on one thread.
  // A host function is compute of the user's that the planner cannot size: on one thread each of
  // its turns would hold up the dealer's feeds.
  const auto any = [&g](stage_kind k) {
    return std::any_of(g.stages.begin(), g.stages.end(), [k](const auto& s) { return s.kind == k; });
  };
  if (!any(stage_kind::dealer) || any(stage_kind::host)) return {};
  const auto b = count_busy_threads(g, p, topo, host);
  const std::size_t workers = b.kernels + b.batched;
  if (host.runtime_threads < 2 || workers < host.cores) return {};
  return "a farm whose " + std::to_string(workers) + " kernels on CPU devices fill the host's " +
         std::to_string(host.cores) + (host.cores == 1 ? " core" : " cores") +
         ": its host stages take turns on one io thread";
}

namespace {
// Whether every kernel on a CPU device that count_busy_threads counts as resident would go
// persistent: of automatic mode (or forced persistent) on a device that can, within its pool's
// room (occupancy::persistent_room). A parked one beside paced host stages did worse than batched
// (a PoCL pool of one worker: 84-93 against 95-110 M msgs/s).
bool all_persistent(const graph& g, const plan& p, const topology& topo) {
  std::map<const occupancy*, std::uint32_t> wanted;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    if (!s.is_kernel() || p.stages[i].fused_into || s.kernel_opts.mode == kernel_mode::batched) continue;
    const auto& dev = topo[*p.stages[i].device];
    const auto& info = dev.info();
    if (info.type != device_type::cpu ||
        (!info.supports(kernel_mode::persistent) && !info.supports(kernel_mode::parked)))
      continue; // not resident: counted as batched
    if (s.kernel_opts.mode == kernel_mode::parked || !info.supports(kernel_mode::persistent)) return false;
    ++wanted[&dev.budget()];
  }
  return std::all_of(wanted.begin(), wanted.end(),
                     [](const auto& w) { return w.first->persistent_room() >= w.second; });
}
} // namespace

bool resident_under_throughput(const graph& g, const plan& p, const topology& topo, host_capacity host,
                               std::string& why) {
  // A farm's replicas stay batched: its dealer feeds each by its measured speed, launch by launch
  // (farm.hpp), and its measurements were taken so.
  if (std::any_of(g.stages.begin(), g.stages.end(), [](const auto& s) { return s.kind == stage_kind::dealer; }))
    return false;
  const auto b = count_busy_threads(g, p, topo, host);
  if (b.kernels == 0 || !all_persistent(g, p, topo)) return false;
  const std::size_t host_work = count_host_threads(g, p, topo).total() > 0 ? 1 : 0;
  const std::size_t spinners = b.kernels + b.batched + (b.application ? 1 : 0) + host_work;
  if (spinners > host.cores) return false;
  why = std::to_string(b.kernels) + (b.kernels == 1 ? " kernel on CPU devices stays" : " kernels on CPU devices stay") +
        " resident: " + std::to_string(spinners) + " busy with the host stages paced on one fit " +
        std::to_string(host.cores) + " host core" + (host.cores == 1 ? "" : "s");
  return true;
}

} // namespace ringpipe::detail
