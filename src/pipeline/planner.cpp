#include "planner.hpp"

#include "../core/process_fence.hpp"
#include "../kernel/mode_choice.hpp"

#include <ringpipe/link.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/program.hpp>

#include <algorithm>
#include <map>

namespace ringpipe::detail {
namespace {

struct planning {
  const graph& g;
  const topology& topo;
  const pipeline_options& options;
  host_capacity host;
  plan p;

  void place();
  std::vector<std::size_t> placed_neighbours(std::size_t i) const;
  void group_devices();
  void fuse();
  void choose_objective();
  void apply_objective();
  void check_modes() const;
  void check_budget() const;
  void choose_links();
};

/// The devices of the kernel stages placed so far that stage `i` exchanges messages with: over a
/// connection, or through host stages only (a host stage between two kernels copies anyway, but
/// the two kernels' data still meet).
std::vector<std::size_t> planning::placed_neighbours(std::size_t i) const {
  std::vector<std::size_t> found;
  std::vector<bool> seen(g.stages.size(), false);
  std::vector<std::size_t> todo{i};
  seen[i] = true;
  while (!todo.empty()) {
    const auto at = todo.back();
    todo.pop_back();
    auto visit = [&](std::size_t next) {
      if (seen[next]) return;
      seen[next] = true;
      if (g.stages[next].is_kernel()) {
        if (p.stages[next].device) found.push_back(*p.stages[next].device);
      } else {
        todo.push_back(next);
      }
    };
    for (const auto ei : g.stages[at].in_edges)
      visit(g.edges[ei].from);
    for (const auto ei : g.stages[at].out_edges)
      visit(g.edges[ei].to);
  }
  return found;
}

// The devices kernels run on, in groups whose members reach each other through direct links.
void planning::group_devices() {
  std::vector<std::size_t> used;
  for (const auto& s : p.stages)
    if (s.device && std::find(used.begin(), used.end(), *s.device) == used.end()) used.push_back(*s.device);
  std::sort(used.begin(), used.end());
  for (const auto d : used) {
    auto joins = [&](const std::vector<std::size_t>& grp) {
      return choose_link(topo[grp.front()], topo[d]) == link_kind::direct &&
             choose_link(topo[d], topo[grp.front()]) == link_kind::direct;
    };
    auto it = std::find_if(p.device_groups.begin(), p.device_groups.end(), joins);
    if (it == p.device_groups.end())
      p.device_groups.push_back({d});
    else
      it->push_back(d);
  }
}

void planning::place() {
  static const freest_device fallback;
  const placement_policy& policy = options.placement ? *options.placement : fallback;
  std::vector<std::uint32_t> placed(topo.size(), 0);
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    auto& ps = p.stages[i];
    ps.spec = s.spec;
    ps.out = s.out;
    ps.out_edges = s.out_edges;
    if (!s.is_kernel()) continue;
    if (topo.size() == 0)
      throw error(errc::invalid_pipeline, "pipeline '" + g.name + "': stage '" + s.name +
                                              "' is a kernel stage, but the runtime has no device (a runtime of "
                                              "topology::discover() finds the OpenCL devices)");
    const bool asked = s.where.device.has_value();
    std::size_t index = 0;
    if (asked) {
      index = *s.where.device;
    } else {
      const auto neighbours = placed_neighbours(i);
      index = policy.place(placement_request{s.name, topo, placed, neighbours});
    }
    if (index >= topo.size())
      throw error(errc::invalid_pipeline, "pipeline '" + g.name + "': stage '" + s.name + "' is placed on device " +
                                              std::to_string(index) + (asked ? "" : " by the placement policy") +
                                              " but the runtime has " + std::to_string(topo.size()) + " devices");
    ++placed[index];
    ps.device = index;
  }
}

// Whether the program (with its includes) defines `name` with RINGPIPE_MAP_KERNEL. An include
// that cannot be resolved is not fused; building the kernel reports it with the stage's name.
bool declares_map_kernel(const kernel_spec& spec, const std::string& name) {
  try {
    return resolve_includes(spec.source, spec.name, spec.include_dirs).find("RINGPIPE_MAP_KERNEL(" + name + ",") !=
           std::string::npos;
  } catch (const error&) {
    return false;
  }
}
bool same_options(const kernel_options& a, const kernel_options& b) {
  return a.mode == b.mode && a.local_size == b.local_size && a.idle_budget == b.idle_budget &&
         a.batch_capacity == b.batch_capacity && a.staging_lanes == b.staging_lanes &&
         a.stall_timeout == b.stall_timeout;
}

// Adjacent map kernels of one program on one device, with nothing else reading between them,
// become one kernel (RINGPIPE_FUSE): one resident kernel and no ring instead of two.
void planning::fuse() {
  if (!options.fuse_kernels) return;
  for (std::size_t ai = 0; ai < g.stages.size(); ++ai) {
    const auto& a = g.stages[ai];
    auto& pa = p.stages[ai];
    if (!a.is_kernel() || pa.fused_into || !a.spec.args.empty() || !declares_map_kernel(a.spec, a.spec.name)) continue;
    while (pa.out_edges.size() == 1) {
      const auto ei = pa.out_edges[0];
      const auto& e = g.edges[ei];
      const auto& b = g.stages[e.to];
      if (!b.is_kernel() || b.in_edges.size() != 1 || e.options.kind || e.options.capacity != 0) break;
      if (p.stages[e.to].device != pa.device || b.spec.source != a.spec.source ||
          b.spec.build_options != a.spec.build_options || b.spec.include_dirs != a.spec.include_dirs ||
          !declares_map_kernel(a.spec, b.spec.name) || !b.spec.args.empty() || b.spec.state_bytes != 0 ||
          !same_options(a.kernel_opts, b.kernel_opts))
        break;
      pa.spec.source += "\nRINGPIPE_FUSE(" + pa.spec.name + ", " + b.spec.name + ")\n";
      pa.spec.name += "__then__" + b.spec.name;
      pa.out = b.out;
      pa.fused_with.push_back(b.name);
      p.links[ei].kind = link_kind::fused;
      pa.out_edges = b.out_edges;
      for (const auto x : pa.out_edges)
        p.links[x].from = ai;
      p.stages[e.to].out_edges.clear();
      p.stages[e.to].fused_into = ai;
    }
  }
}

// A wide ring (4,096 slots or more, 1 MiB at most) doubles so that a 1 MiB batch is half of it
// (llvmpipe, 16-byte messages: 30-50 M msgs/s over 131,072 slots, 23-35 M over 65,536).
std::uint32_t widened_for_one_lane(std::uint32_t capacity, std::size_t slot) {
  const std::size_t bytes = std::size_t{capacity} * std::max<std::size_t>(1, slot);
  return capacity >= 4096 && bytes <= (std::size_t{1} << 20) ? capacity * 2 : capacity;
}

// Automatic: latency while the threads it keeps busy fit the host's cores, else throughput, unless
// the user fixed the rings' capacity: batched launches pay off only over the objective's wide
// rings (measured on 2 cores, 16-byte messages at 1,024 slots: a kernel-to-kernel stream 5x
// slower batched than resident, a chain behind an inlet 4x faster; at 1 slot 30x slower). What
// counts as busy: busy_threads (a GPU kernel takes no host core).
void planning::choose_objective() {
  if (options.objective != pipeline_objective::automatic) {
    p.objective = options.objective;
    p.objective_reason = "asked for";
    return;
  }
  if (options.capacity != 0) {
    p.objective = pipeline_objective::latency;
    p.objective_reason = "chosen: pipeline_options::capacity is set to " + std::to_string(options.capacity) +
                         " slots; batched launches need the throughput objective's wide rings";
    return;
  }
  const auto b = count_busy_threads(g, p, topo, host);
  const std::size_t busy = b.total();
  const bool fits = busy <= host.cores;
  p.objective = fits ? pipeline_objective::latency : pipeline_objective::throughput;
  const auto count = [](std::size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  p.objective_reason = "chosen: " + count(busy, "thread") +
                       (fits ? " busy under latency fit " : " busy under latency exceed ") +
                       count(host.cores, "host core") + " (" + count(b.kernels, "resident kernel") +
                       (b.batched > 0 ? " and " + count(b.batched, "batched kernel") : "") + " on CPU devices, " +
                       count(b.runtime_busy, "runtime thread") + " for " + count(b.actors, "host stage") +
                       (b.application ? ", 1 application thread)" : ")");
}

// Throughput: kernels that name no mode run batched (where automatic chose it, those on CPU
// devices stay resident where they fit the cores beside the host stages: resident_under_throughput)
// and rings get about 1 MiB unless a capacity is given; latency: the user's options as they are,
// 1,024-slot rings by default.
void planning::apply_objective() {
  const bool throughput = p.objective == pipeline_objective::throughput;
  std::string why;
  const bool cpu_resident = throughput && options.objective == pipeline_objective::automatic &&
                            resident_under_throughput(g, p, topo, host, why);
  if (cpu_resident) p.objective_reason += "; " + why;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    auto& ps = p.stages[i];
    ps.kernel_opts = g.stages[i].kernel_opts;
    const auto& s = g.stages[i];
    if (s.is_kernel() && !ps.kernel_opts.mode && ps.device &&
        std::find(g.resident.begin(), g.resident.end(), s.name) != g.resident.end() &&
        topo[*ps.device].info().supports(kernel_mode::persistent)) {
      ps.kernel_opts.mode = kernel_mode::persistent; // waits on its device (a barrier's kernel)
      continue;
    }
    if (cpu_resident && s.is_kernel() && ps.device && topo[*ps.device].info().type == device_type::cpu) continue;
    if (throughput && g.stages[i].is_kernel() && !ps.kernel_opts.mode) {
      ps.kernel_opts.mode = kernel_mode::batched;
      ps.mode_from_objective = true;
    }
  }
  // A kernel on a device without shared memory runs its batches through device mirrors; with one
  // staging lane (CPU devices) each batch takes up to half its input ring (mirror_spans.cpp).
  const auto one_lane_mirrors = [&](std::size_t i) {
    if (!g.stages[i].is_kernel() || !p.stages[i].device) return false;
    const auto& d = topo[*p.stages[i].device];
    return !reaches_shared_memory(d) &&
           staging_lanes(p.stages[i].kernel_opts.staging_lanes, d.info().type == device_type::cpu) < 2;
  };
  for (std::size_t ei = 0; ei < g.edges.size(); ++ei) {
    const auto& e = g.edges[ei];
    const std::size_t slot = g.stages[e.from].out.size;
    auto& capacity = p.links[ei].capacity;
    capacity = e.options.capacity != 0 ? e.options.capacity : default_capacity(options, p.objective, slot);
    if (e.options.capacity == 0 && options.capacity == 0 && (one_lane_mirrors(e.from) || one_lane_mirrors(e.to)))
      capacity = widened_for_one_lane(capacity, slot);
  }
}

// A forced mode the device cannot run at all: refused before budgets are even counted.
void planning::check_modes() const {
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    if (!s.is_kernel() || p.stages[i].fused_into || !s.kernel_opts.mode) continue;
    const auto& dev = topo[*p.stages[i].device];
    if (dev.info().supports(*s.kernel_opts.mode)) continue;
    std::string modes;
    for (const auto m : dev.info().modes)
      modes += (modes.empty() ? "" : ", ") + std::string(to_string(m));
    throw error(errc::unsupported_mode, "pipeline '" + g.name + "': stage '" + s.name + "' is forced to run " +
                                            std::string(to_string(*s.kernel_opts.mode)) + " on " + dev.label() +
                                            ", which runs only " + modes +
                                            " (persistent and parked need fine-grained SVM with SVM atomics)");
  }
}

// Forced persistent kernels beyond a pool's budget: refused before anything is built.
void planning::check_budget() const {
  std::map<std::string, std::vector<std::string>> forced;
  std::map<std::string, std::uint32_t> budget;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& s = g.stages[i];
    if (!s.is_kernel() || p.stages[i].fused_into || s.kernel_opts.mode != kernel_mode::persistent) continue;
    const auto& pool = topo[*p.stages[i].device].budget();
    forced[pool.pool()].push_back(s.name);
    budget[pool.pool()] = pool.budget() - pool.persistent_in_use();
  }
  for (const auto& [pool, names] : forced) {
    if (names.size() <= budget[pool]) continue;
    std::string list;
    for (const auto& n : names)
      list.append(list.empty() ? "'" : ", '").append(n).append("'");
    std::string what = "pipeline '" + g.name + "' forces " + std::to_string(names.size());
    what.append(" persistent kernels (").append(list).append(") onto pool '").append(pool).append("', which has ");
    what.append(std::to_string(budget[pool])).append(" free workers; let the runtime choose their modes (parked)");
    throw error(errc::budget_exceeded, what);
  }
}

// A kernel end polls the link's ring itself when it has this one connection on that side;
// otherwise a host mover (merge or split) stands between, and the end is the host.
void planning::choose_links() {
  for (std::size_t ei = 0; ei < g.edges.size(); ++ei) {
    auto& l = p.links[ei];
    if (l.kind == link_kind::fused) continue;
    const auto& e = g.edges[ei];
    const auto& a = g.stages[l.from];
    const auto& b = g.stages[e.to];
    if (a.is_kernel() && p.stages[l.from].out_edges.size() == 1) l.producer_dev = p.stages[l.from].device;
    if (b.is_kernel() && b.in_edges.size() == 1) l.consumer_dev = p.stages[e.to].device;
    const auto end = [&](const std::optional<std::size_t>& d) { return d ? link_end::on(topo[*d]) : link_end::host(); };
    l.kind = choose_link(end(l.producer_dev), end(l.consumer_dev));
    if (e.options.kind == link_kind::direct && l.kind != link_kind::direct) {
      const auto label = [&](const std::optional<std::size_t>& d) {
        return d ? topo[*d].label() : std::string("host");
      };
      throw error(errc::invalid_pipeline, "connection " + e.from_port + " -> " + e.to_port +
                                              " cannot be direct: its ends do not share fine-grained SVM (" +
                                              label(l.producer_dev) + " -> " + label(l.consumer_dev) + ")");
    }
    if (e.options.kind == link_kind::fused)
      throw error(errc::invalid_pipeline, "connection " + e.from_port + " -> " + e.to_port +
                                              ": fused links are chosen by the planner, not forced");
    // Two kernels that cannot share one ring get a ring each and a mover; a forced staged link
    // always goes through a mover, so that it is measured as one.
    const bool two_devices = l.producer_dev && l.consumer_dev && *l.producer_dev != *l.consumer_dev;
    l.mover = e.options.kind == link_kind::staged || (l.kind == link_kind::staged && two_devices);
    if (l.mover) l.kind = link_kind::staged;
  }
}

} // namespace

std::uint32_t default_capacity(const pipeline_options& options, pipeline_objective objective, std::size_t slot_size) {
  if (options.capacity != 0) return options.capacity;
  std::uint32_t capacity = 1024;
  const std::size_t slot = std::max<std::size_t>(1, slot_size);
  // Automatic's latency gets wide rings too: its resident kernels hand a backlog to spans, which
  // need room to pay for their launches (adaptive_driver.cpp).
  const bool wide = objective == pipeline_objective::throughput || options.objective == pipeline_objective::automatic;
  while (wide && capacity < 65536 && std::size_t{capacity} * 2 * slot <= (1u << 20))
    capacity *= 2;
  // Big messages get fewer slots, at most about 4 MiB a ring (at least 4 slots): 1,024 slots of
  // 1 MiB messages would be a 1 GiB ring, and a stream of them is fastest with a few slots that
  // stay in the caches (4 slots of 1 MiB over MPI: 8.5 GB/s, 16 slots: 5 GB/s).
  while (capacity > 4 && std::size_t{capacity} * slot > (std::size_t{4} << 20))
    capacity /= 2;
  return capacity;
}

std::uint32_t default_staging_batch(const pipeline_options& options, pipeline_objective objective,
                                    std::size_t msg_bytes) {
  if (options.staging_batch != 0) return options.staging_batch;
  std::uint32_t batch = 256;
  const std::size_t bytes = std::max<std::size_t>(1, msg_bytes);
  while (objective == pipeline_objective::throughput && batch < 4096 && std::size_t{batch} * 2 * bytes <= (1u << 20))
    batch *= 2;
  return batch;
}

plan make_plan(const graph& g, const topology& devices, const pipeline_options& options, host_capacity host) {
  validate(g);
  planning run{g, devices, options, host, {}};
  run.p.stages.resize(g.stages.size());
  run.p.links.resize(g.edges.size());
  for (std::size_t ei = 0; ei < g.edges.size(); ++ei)
    run.p.links[ei].from = g.edges[ei].from;
  run.place();
  run.fuse();
  run.check_modes();
  run.check_budget();
  run.choose_links();
  run.group_devices();
  run.choose_objective();
  run.apply_objective();
  park_where_pools_fall_short(g, devices, host, run.p);
  run.p.threads = count_host_threads(g, run.p, devices);
  run.p.threads.one_thread_reason = one_io_thread_reason(g, run.p, devices, host);
  return std::move(run.p);
}

pipeline_plan plan::summary(const graph& g) const {
  pipeline_plan out;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& ps = stages[i];
    const auto mode = ps.prefer_parked ? std::optional(kernel_mode::parked) : ps.kernel_opts.mode;
    out.stages.push_back({g.stages[i].name, g.stages[i].kind, ps.device,
                          ps.fused_into ? g.stages[*ps.fused_into].name : std::string(), ps.fused_with,
                          g.stages[i].is_kernel() ? mode : std::nullopt, ps.mode_from_objective || ps.prefer_parked,
                          ps.leave_when_idle});
  }
  for (std::size_t ei = 0; ei < g.edges.size(); ++ei)
    out.links.push_back({g.edges[ei].from_port, g.edges[ei].to_port, links[ei].kind,
                         g.edges[ei].options.kind.has_value(), links[ei].mover, links[ei].capacity});
  out.device_groups = device_groups;
  out.objective = std::string(to_string(objective));
  out.objective_reason = objective_reason;
  out.parking_reason = parking_reason;
  out.host_stage_threads = threads.stages;
  out.copying_proxy_threads = threads.copying_proxies;
  out.one_io_thread_reason = threads.one_thread_reason;
  out.idle_polling_reason = idle_polling_reason();
  return out;
}

std::string idle_polling_reason() {
  if (process_wide_fence_offered()) return "";
  return "idle stages keep polling (every 0.2-1 ms) while nothing comes: this kernel refuses membarrier (private "
         "expedited), which sleeping until a push needs";
}

} // namespace ringpipe::detail
