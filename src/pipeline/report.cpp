// What a running pipeline reports: metrics, the plan as built, and labels for its errors.

#include "runner.hpp"

#include <ringpipe/link.hpp>

#include <algorithm>

namespace ringpipe::detail {

std::string runner::stage_label(std::size_t i) const {
  const auto& s = g_.stages[i];
  const auto& ps = plan_.stages[i];
  std::string l = std::string(to_string(s.kind)) + " '" + s.name + "'";
  if (const auto& k = stages_[i].kernel)
    l += " on " + rt_.devices()[*ps.device].label() + " (" + std::string(to_string(k->mode())) + ")";
  for (const auto& f : ps.fused_with)
    l += ", fused with '" + f + "'";
  if (ps.fused_into) l += ": runs fused in the kernel of '" + g_.stages[*ps.fused_into].name + "'";
  return l;
}

std::string runner::why_running(std::size_t i) const {
  const auto& s = stages_[i];
  if (s.actor) return std::to_string(s.actor->queued()) + " messages queued";
  if (s.kernel)
    return std::string(to_string(s.kernel->state())) + ", " + std::to_string(s.kernel_in ? s.kernel_in->size() : 0) +
           " messages queued";
  if (g_.stages[i].kind == stage_kind::outlet)
    return std::to_string(s.port->size()) + " messages not yet popped by the application";
  return "not closed by the application";
}

std::string runner::plan_text() const {
  std::string s = "objective: " + std::string(to_string(plan_.objective)) + " (" + plan_.objective_reason + ")\n";
  if (!plan_.parking_reason.empty()) s += plan_.parking_reason + "\n";
  if (const auto idle = idle_polling_reason(); !idle.empty()) s += idle + "\n";
  if (plan_.threads.total() > 0) {
    s += describe_host_threads(plan_.threads.stages, plan_.threads.copying_proxies, plan_.threads.one_thread_reason) +
         "; the runtime runs " + std::to_string(rt_.threads()) + " (at most " + std::to_string(rt_.thread_limit()) +
         ")\n";
  }
  for (std::size_t i = 0; i < g_.stages.size(); ++i) {
    s += stage_label(i);
    if (const auto& a = stages_[i].actor) {
      const auto spin = a->spin_window().count();
      s += spin > 0 ? ": re-polls for " + std::to_string(spin) + " us after a turn that moved messages"
                    : ": backs off after every turn and sleeps until about " + std::to_string(a->pace()) +
                          " messages wait at its rate (nothing spins under throughput)";
    }
    s += "\n";
  }
  for (std::size_t ei = 0; ei < g_.edges.size(); ++ei) {
    const auto& e = g_.edges[ei];
    const auto& lr = links_[ei];
    s += e.from_port + " -> " + e.to_port + ": " + std::string(to_string(plan_.links[ei].kind));
    if (lr.consumer_ring) {
      const auto memory = [](const ring_buffer& r) { return r.memory() == ring_memory::svm ? "SVM" : "host memory"; };
      s += " (" + std::to_string(lr.consumer_ring->capacity()) + " slots in " + memory(*lr.consumer_ring);
      if (lr.mover) s += std::string(", copied by a host mover from a ring in ") + memory(*lr.producer_ring);
      s += ")";
    }
    s += "\n";
  }
  return s;
}

namespace {

void add_queue(stage_metrics& sm, const std::shared_ptr<ring_buffer>& r) {
  if (!r) return;
  sm.queue_fill += r->size();
  sm.queue_capacity += r->capacity();
  sm.queue_high_water = std::max(sm.queue_high_water, r->high_water());
}

void actor_metrics(stage_metrics& sm, const host_stage& a) {
  sm.msgs_in = a.msgs_in.load();
  sm.msgs_out = a.msgs_out.load();
  sm.busy_s = static_cast<double>(a.busy_ns.load()) * 1e-9;
  sm.state = a.failed ? "failed" : a.finished ? "finished" : a.exited ? "stopped" : "running";
  for (const auto& in : a.inputs())
    add_queue(sm, in->ring);
}

} // namespace

pipeline_metrics runner::metrics() const {
  pipeline_metrics m;
  for (const auto& stats : g_.barrier_metrics)
    m.barriers.push_back(stats());
  m.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  for (std::size_t i = 0; i < g_.stages.size(); ++i) {
    const auto& s = g_.stages[i];
    const auto& ps = plan_.stages[i];
    const auto& sr = stages_[i];
    stage_metrics sm;
    sm.name = s.name;
    sm.kind = s.kind;
    sm.device = ps.device ? rt_.devices()[*ps.device].label() : "host";
    sm.mode = "actor";
    if (ps.fused_into) {
      sm.mode = "fused";
      sm.state = "fused into '" + g_.stages[*ps.fused_into].name + "'";
    } else if (sr.kernel) {
      const auto st = sr.kernel->stats();
      sm.mode = std::string(to_string(sr.kernel->mode()));
      sm.state = std::string(to_string(sr.kernel->state()));
      sm.msgs_in = st.msgs_in;
      sm.msgs_out = st.msgs_out;
      sm.launches = st.launches;
      add_queue(sm, sr.kernel_in);
    } else if (sr.actor) {
      actor_metrics(sm, *sr.actor);
      if (const auto* dealer = dynamic_cast<const farm_dealer*>(sr.actor.get())) {
        sm.steals = dealer->steals.load(std::memory_order_relaxed);
        sm.stolen = dealer->stolen.load(std::memory_order_relaxed);
        sm.rebalances = dealer->rebalances.load(std::memory_order_relaxed);
        sm.rebalanced = dealer->rebalanced.load(std::memory_order_relaxed);
      }
    } else if (sr.port) {
      sm.mode = "application";
      sm.msgs_in = sm.msgs_out = s.kind == stage_kind::inlet ? sr.port->pushed() : sr.port->popped();
      sm.state = s.kind == stage_kind::inlet ? (sr.port->closed() ? "closed" : "open")
                                             : (sr.port->drained() ? "finished" : "open");
      if (s.kind == stage_kind::outlet) add_queue(sm, sr.port);
    }
    m.stages.push_back(std::move(sm));
  }
  // A farm's dealer row (m.stages[i] is stage i) and its replicas: the speeds it deals by.
  for (std::size_t i = 0; i < stages_.size(); ++i)
    if (const auto* dealer = dynamic_cast<const farm_dealer*>(stages_[i].actor.get())) {
      const auto balance = dealer->balance();
      m.stages[i].drain_imbalance = balance.imbalance;
      for (const auto& replica : balance.devices)
        for (auto& row : m.stages)
          if (row.name == replica.name) row.intake_per_s = replica.measured ? replica.speed : 0;
    }
  for (const auto& a : actors_) {
    const bool user_stage =
        std::any_of(stages_.begin(), stages_.end(), [&](const stage_run& s) { return s.actor == a; });
    if (user_stage) continue; // a user's host stage, listed above
    stage_metrics sm;
    sm.name = a->name();
    sm.kind = stage_kind::mover;
    sm.device = "host";
    sm.mode = "actor";
    actor_metrics(sm, *a);
    m.stages.push_back(std::move(sm));
  }
  // A kernel end of a link on a device without shared memory copies each of its batches through
  // pinned memory: one copy on that link per launch.
  const auto mirrored_launches = [&](const std::optional<std::size_t>& dev, std::size_t stage) -> std::uint64_t {
    if (!dev || reaches_shared_memory(rt_.devices()[*dev]) || !stages_[stage].kernel) return 0;
    return stages_[stage].kernel->stats().launches;
  };
  const auto end_label = [&](const std::optional<std::size_t>& dev) {
    return dev ? rt_.devices()[*dev].label() : std::string("host");
  };
  const auto count_transfer = [&](transfer_report& r, const std::optional<std::size_t>& from,
                                  const std::optional<std::size_t>& to, const link_metrics& lm) {
    const auto f = end_label(from), t = end_label(to);
    auto row =
        std::find_if(r.pairs.begin(), r.pairs.end(), [&](const transfer_stats& p) { return p.from == f && p.to == t; });
    if (row == r.pairs.end()) row = r.pairs.insert(r.pairs.end(), transfer_stats{f, t, copy_path::staged});
    row->copies += lm.batches;
    row->bytes += lm.bytes;
  };
  for (std::size_t ei = 0; ei < g_.edges.size(); ++ei) {
    const auto& e = g_.edges[ei];
    const auto& lr = links_[ei];
    link_metrics lm;
    lm.from = e.from_port;
    lm.to = e.to_port;
    lm.kind = plan_.links[ei].kind;
    lm.forced = e.options.kind.has_value();
    if (lr.delivered) lm.messages = lr.delivered();
    lm.bytes = lm.messages * plan_.stages[plan_.links[ei].from].out.size;
    const auto& pl = plan_.links[ei];
    if (lm.kind == link_kind::staged)
      lm.batches = (lr.mover ? lr.mover->batches.load() : 0) + mirrored_launches(pl.producer_dev, pl.from) +
                   mirrored_launches(pl.consumer_dev, e.to);
    m.copies += lm.batches;
    if (lm.kind == link_kind::staged) count_transfer(m.transfers, pl.producer_dev, pl.consumer_dev, lm);
    if (lr.consumer_ring) {
      lm.capacity = lr.consumer_ring->capacity();
      lm.high_water = lr.consumer_ring->high_water();
      if (lr.producer_ring != lr.consumer_ring) {
        lm.capacity += lr.producer_ring->capacity();
        lm.high_water = std::max(lm.high_water, lr.producer_ring->high_water());
      }
    }
    (lm.kind == link_kind::direct ? m.direct_links : lm.kind == link_kind::fused ? m.fused_links : m.staged_links) += 1;
    m.links.push_back(std::move(lm));
  }
  return m;
}

stop_report runner::undelivered(const host_stage* in_turn, const host_stage::run_at_stop& run) const {
  stop_report report;
  // Every ring once, named as the user knows it: a link's rings (one, or two around a mover) under
  // the link's name; the ring a merge feeds or a split drains under the kernel's port.
  std::vector<const ring_buffer*> seen;
  auto count = [&](const std::string& name, std::initializer_list<const std::shared_ptr<ring_buffer>*> rings) {
    std::uint64_t n = 0;
    for (const auto* r : rings)
      if (*r && std::find(seen.begin(), seen.end(), r->get()) == seen.end()) {
        seen.push_back(r->get());
        const std::uint64_t size = (*r)->size();
        n += r->get() == run.window ? size - std::min(size, run.taken) : size; // given to the function
      }
    if (n == 0) return;
    report.undelivered += n;
    report.rings.push_back({name, n});
  };
  for (std::size_t ei = 0; ei < links_.size(); ++ei)
    count(g_.edges[ei].ring_name(), {&links_[ei].producer_ring, &links_[ei].consumer_ring});
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    const std::uint64_t lost = stages_[i].kernel  ? stages_[i].kernel->stats().lost
                               : stages_[i].actor ? stages_[i].actor->lost.load(std::memory_order_relaxed)
                                                  : 0;
    if (lost > 0) {
      report.lost += lost;
      report.lost_in.push_back({g_.stages[i].name, lost});
    }
    if (const auto& a = stages_[i].actor) {
      const std::uint64_t held = a->held() + (a.get() == in_turn ? run.made : 0); // made, pushed on its return
      if (held > 0) {
        report.undelivered += held;
        report.rings.push_back({g_.stages[i].name + " (held by the stage)", held});
      }
    }
    count(g_.stages[i].in_port() + " (merged)", {&stages_[i].kernel_in});
    count(g_.stages[i].out_port() + " (to split)", {&stages_[i].kernel_out});
  }
  return report;
}

} // namespace ringpipe::detail
