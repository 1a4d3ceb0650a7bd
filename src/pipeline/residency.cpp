// Which kernels of a latency pipeline stay off persistent mode. On a CPU device the pool's
// workers are host threads: a persistent kernel spins on a core for good. When a pool cannot keep
// all of a pipeline's kernels resident, the runtime would make the first ones persistent and park
// the rest, and where the pipeline's busy threads outnumber the cores, each parked kernel's
// relaunches (one per message at capacity 1) would then wait for the cores left, beside every
// host stage: a 4-stage capacity-1 chain on 2 cores took
// 0.69 ms a message that way, 0.14 ms with both of its kernels parked. A parked kernel that host
// stages feed also leaves as soon as its input runs dry: its idle spin would hold the core its
// feeder needs (0.56 ms a message in that chain with the default idle budget).

#include "planner.hpp"

#include <ringpipe/occupancy.hpp>

#include <algorithm>
#include <map>

namespace ringpipe::detail {
namespace {
// Whether host threads push the kernel's input: a source, host stage, inlet, mover or merge.
bool fed_by_host(const graph& g, const plan& p, std::size_t i) {
  const auto& in = g.stages[i].in_edges;
  if (in.size() != 1) return !in.empty();
  const auto& l = p.links[in[0]];
  return l.mover || !g.stages[l.from].is_kernel();
}
} // namespace

void park_where_pools_fall_short(const graph& g, const topology& topo, host_capacity host, plan& p) {
  if (p.objective != pipeline_objective::latency) return; // throughput: kernels run batched
  // With a core for every busy thread, a resident kernel takes none that a relaunch waits for.
  if (count_busy_threads(g, p, topo, host).total() <= host.cores) return;
  struct pool_count {
    const occupancy* pool = nullptr;
    std::vector<std::size_t> automatic; // stages whose mode the runtime chooses
    std::uint32_t forced_persistent = 0;
  };
  std::map<std::string, pool_count> pools;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& ps = p.stages[i];
    if (!g.stages[i].is_kernel() || ps.fused_into || !ps.device) continue;
    const auto& dev = topo[*ps.device];
    if (dev.info().type != device_type::cpu || !dev.info().supports(kernel_mode::persistent)) continue;
    auto& c = pools[dev.budget().pool()];
    c.pool = &dev.budget();
    if (!ps.kernel_opts.mode)
      c.automatic.push_back(i);
    else if (*ps.kernel_opts.mode == kernel_mode::persistent)
      ++c.forced_persistent;
  }
  std::string note;
  for (const auto& [name, c] : pools) {
    // occupancy::persistent_room leaves one worker for parked and batched kernels.
    const std::uint32_t room = c.pool->persistent_room();
    const std::uint32_t resident = room > c.forced_persistent ? room - c.forced_persistent : 0;
    if (resident == 0 || c.automatic.size() <= resident) continue; // all resident, or all parked anyway
    std::string names, fed;
    for (const auto i : c.automatic) {
      p.stages[i].prefer_parked = true;
      p.stages[i].leave_when_idle = fed_by_host(g, p, i);
      names.append(names.empty() ? "'" : ", '").append(g.stages[i].name).append("'");
      if (p.stages[i].leave_when_idle) fed.append(fed.empty() ? "'" : ", '").append(g.stages[i].name).append("'");
    }
    note.append(note.empty() ? "" : "; ")
        .append("kernels ")
        .append(names)
        .append(" park: pool '")
        .append(name)
        .append("' keeps ")
        .append(std::to_string(resident))
        .append(" of their ")
        .append(std::to_string(c.automatic.size()))
        .append(" resident, and its workers are host threads: a resident one would spin on the core the others' "
                "relaunches need")
        .append(fed.empty() ? "" : "; " + fed + ", fed by host threads, leave as soon as their input runs dry");
  }
  p.parking_reason = note;
}

} // namespace ringpipe::detail
