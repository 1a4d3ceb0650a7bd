#include "farm_names.hpp"
#include "text.hpp"

#include <ringpipe/detail/json.hpp>
#include <ringpipe/metrics.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace ringpipe {

std::string_view to_string(stage_kind k) noexcept {
  switch (k) {
  case stage_kind::source: return "source";
  case stage_kind::host: return "host";
  case stage_kind::kernel: return "kernel";
  case stage_kind::sink: return "sink";
  case stage_kind::inlet: return "inlet";
  case stage_kind::outlet: return "outlet";
  case stage_kind::mover: return "mover";
  case stage_kind::dealer: return "dealer";
  case stage_kind::merger: return "merger";
  }
  return "?";
}

using detail::clip;
using detail::format;
using detail::short_label;

namespace {
// A replica of farm `farm`: the kernel stage "farm@k".
bool is_replica_of(const stage_metrics& s, std::string_view farm) noexcept {
  return s.kind == stage_kind::kernel && detail::named_as_replica_of(s.name, farm);
}
} // namespace

std::string barrier_stats::table() const {
  std::string t;
  t += "barrier '" + name + "': " + std::to_string(phases) + " phases\n";
  char line[160];
  std::snprintf(line, sizeof(line), "%-24s %10s %10s %12s %12s %14s\n", "participant", "arrivals", "waits",
                "wait p50 us", "wait p99 us", "last to arrive");
  t += line;
  bool any_on_device = false;
  for (const auto& p : participants) {
    if (p.on_device) {
      any_on_device = true;
      std::snprintf(line, sizeof(line), "%-24s %10llu %10llu %12s %12s %14llu\n", p.name.c_str(),
                    static_cast<unsigned long long>(p.arrivals), static_cast<unsigned long long>(p.waits), "on device",
                    "on device", static_cast<unsigned long long>(p.last_to_arrive));
    } else {
      std::snprintf(line, sizeof(line), "%-24s %10llu %10llu %12.1f %12.1f %14llu\n", p.name.c_str(),
                    static_cast<unsigned long long>(p.arrivals), static_cast<unsigned long long>(p.waits),
                    p.wait_p50_us, p.wait_p99_us, static_cast<unsigned long long>(p.last_to_arrive));
    }
    t += line;
  }
  if (any_on_device) t += "(a kernel waits on its device, which has no clock: its waits are counted, not timed)\n";
  return t;
}

const stage_metrics* pipeline_metrics::stage(std::string_view name) const noexcept {
  for (const auto& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

double pipeline_metrics::farm_imbalance(std::string_view farm) const noexcept {
  double most = 0, sum = 0, replicas = 0;
  for (const auto& s : stages) {
    if (!is_replica_of(s, farm)) continue;
    most = std::max(most, static_cast<double>(s.queue_fill));
    sum += s.queue_fill;
    ++replicas;
  }
  return sum > 0 ? most / (sum / replicas) : 1.0;
}

const link_metrics* pipeline_metrics::link(std::string_view from, std::string_view to) const noexcept {
  for (const auto& l : links)
    if (l.from == from && l.to == to) return &l;
  return nullptr;
}

std::string pipeline_metrics::table() const {
  // The name and device columns are as wide as their longest entry (within bounds): a table of
  // PoCL devices otherwise cut every name to the same "#0 pthread-haswell-AMD ~".
  int name_w = 22, device_w = 6;
  std::vector<std::string> devices; // each stage's, shortened once
  for (const auto& s : stages) {
    devices.push_back(short_label(s.device));
    name_w = std::max(name_w, static_cast<int>(s.name.size()));
    device_w = std::max(device_w, static_cast<int>(devices.back().size()));
  }
  name_w = std::min(name_w, 40); // a staged link's mover: "square.out->threshold.in (staged)"
  device_w = std::min(device_w, 36);
  std::string t = format("%-*s %-7s %-*s %-10s %-9s %12s %12s %13s %10s %8s\n", name_w, "stage", "kind", device_w,
                         "device", "mode", "state", "in", "out", "queue", "high-water", "launches");
  std::string long_states; // a state too wide for its column ("fused into 'square'") goes under the table
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& s = stages[i];
    const bool fits = s.state.size() <= 9;
    if (!fits) long_states += "  " + s.name + ": " + s.state + "\n";
    // A stage without an input queue (a source, a producing kernel) has no fill to show, not 0/0.
    const bool queued = s.queue_capacity > 0;
    t += format("%-*s %-7s %-*s %-10s %-9s %12llu %12llu %13s %10s %8llu\n", name_w,
                clip(s.name, static_cast<std::size_t>(name_w)).c_str(), std::string(to_string(s.kind)).c_str(),
                device_w, clip(devices[i], static_cast<std::size_t>(device_w)).c_str(), s.mode.c_str(),
                fits ? s.state.c_str() : "(below)", static_cast<unsigned long long>(s.msgs_in),
                static_cast<unsigned long long>(s.msgs_out),
                queued ? format("%6u/%-6u", s.queue_fill, s.queue_capacity).c_str() : "-",
                queued ? std::to_string(s.queue_high_water).c_str() : "-", static_cast<unsigned long long>(s.launches));
  }
  t += long_states;
  for (const auto& s : stages)
    if (s.kind == stage_kind::dealer) {
      const auto farm = detail::farm_of(s.name);
      t += format("farm %s: %llu steals moved %llu items between replica queues, %llu rebalances moved %llu; replica "
                  "queues max/mean %.2f, drain time max/mean %.2f; replicas take",
                  s.name.c_str(), static_cast<unsigned long long>(s.steals), static_cast<unsigned long long>(s.stolen),
                  static_cast<unsigned long long>(s.rebalances), static_cast<unsigned long long>(s.rebalanced),
                  farm_imbalance(farm), s.drain_imbalance);
      for (const auto& r : stages)
        if (is_replica_of(r, farm)) t += r.intake_per_s > 0 ? format(" %.3g", r.intake_per_s) : std::string(" -");
      t += " per second (items, or cost where the farm is given costs)\n";
    }
  // Ports as wide as the longest too (a rank's inlet port reads "source@rank0->scale.out").
  int port_w = 24;
  for (const auto& l : links)
    port_w = std::max({port_w, static_cast<int>(l.from.size()), static_cast<int>(l.to.size())});
  port_w = std::min(port_w, 40);
  const auto port = [port_w](const std::string& p) { return clip(p, static_cast<std::size_t>(port_w)); };
  t += format("\n%-*s %-*s %-8s %12s %14s %10s %15s\n", port_w, "link from", port_w, "to", "kind", "messages", "bytes",
              "batches", "high-water");
  for (const auto& l : links) {
    t += format("%-*s %-*s %-8s %12llu %14llu %10llu %15s\n", port_w, port(l.from).c_str(), port_w, port(l.to).c_str(),
                (std::string(to_string(l.kind)) + (l.forced ? "*" : "")).c_str(),
                static_cast<unsigned long long>(l.messages), static_cast<unsigned long long>(l.bytes),
                static_cast<unsigned long long>(l.batches), format("%u/%u", l.high_water, l.capacity).c_str());
  }
  t += format("%u direct, %u staged and %u fused links, %llu batches copied through host memory, %.3f s%s\n",
              direct_links, staged_links, fused_links, static_cast<unsigned long long>(copies), elapsed_s,
              std::any_of(links.begin(), links.end(), [](const link_metrics& l) { return l.forced; })
                  ? " (* kind forced)"
                  : "");
  if (!transfers.pairs.empty()) t += "\nstaged copies per pair of ends:\n" + transfers.table();
  for (const auto& b : barriers)
    t += "\n" + b.table();
  return t;
}

std::string pipeline_metrics::json() const {
  using detail::json_number;
  using detail::json_string;
  std::string j = "{\"elapsed_s\": " + json_number(elapsed_s) + ", \"direct_links\": " + std::to_string(direct_links) +
                  ", \"staged_links\": " + std::to_string(staged_links) +
                  ", \"fused_links\": " + std::to_string(fused_links) + ", \"copies\": " + std::to_string(copies) +
                  ", \"stages\": [";
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& s = stages[i];
    j += (i ? ", " : "") + std::string("{\"name\": ") + json_string(s.name) +
         ", \"kind\": " + json_string(to_string(s.kind)) + ", \"device\": " + json_string(s.device) +
         ", \"mode\": " + json_string(s.mode) + ", \"state\": " + json_string(s.state) +
         ", \"msgs_in\": " + std::to_string(s.msgs_in) + ", \"msgs_out\": " + std::to_string(s.msgs_out) +
         ", \"queue_fill\": " + std::to_string(s.queue_fill) +
         ", \"queue_capacity\": " + std::to_string(s.queue_capacity) +
         ", \"queue_high_water\": " + std::to_string(s.queue_high_water) + ", \"busy_s\": " + json_number(s.busy_s) +
         ", \"launches\": " + std::to_string(s.launches) + ", \"steals\": " + std::to_string(s.steals) +
         ", \"stolen\": " + std::to_string(s.stolen) + ", \"rebalances\": " + std::to_string(s.rebalances) +
         ", \"rebalanced\": " + std::to_string(s.rebalanced) +
         ", \"drain_imbalance\": " + json_number(s.drain_imbalance) +
         ", \"intake_per_s\": " + json_number(s.intake_per_s) + "}";
  }
  j += "], \"links\": [";
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto& l = links[i];
    j += (i ? ", " : "") + std::string("{\"from\": ") + json_string(l.from) + ", \"to\": " + json_string(l.to) +
         ", \"kind\": " + json_string(to_string(l.kind)) + ", \"forced\": " + (l.forced ? "true" : "false") +
         ", \"messages\": " + std::to_string(l.messages) + ", \"bytes\": " + std::to_string(l.bytes) +
         ", \"batches\": " + std::to_string(l.batches) + ", \"capacity\": " + std::to_string(l.capacity) +
         ", \"high_water\": " + std::to_string(l.high_water) + "}";
  }
  j += "], \"transfers\": " + transfers.json() + ", \"barriers\": [";
  for (std::size_t i = 0; i < barriers.size(); ++i) {
    const auto& b = barriers[i];
    j += (i ? ", " : "") + std::string("{\"name\": ") + json_string(b.name) +
         ", \"phases\": " + std::to_string(b.phases) + ", \"participants\": [";
    for (std::size_t k = 0; k < b.participants.size(); ++k) {
      const auto& m = b.participants[k];
      j += (k ? ", " : "") + std::string("{\"name\": ") + json_string(m.name) +
           ", \"on_device\": " + (m.on_device ? "true" : "false") + ", \"arrivals\": " + std::to_string(m.arrivals) +
           ", \"waits\": " + std::to_string(m.waits) + ", \"last_to_arrive\": " + std::to_string(m.last_to_arrive) +
           ", \"wait_p50_us\": " + json_number(m.wait_p50_us) + ", \"wait_p99_us\": " + json_number(m.wait_p99_us) +
           "}";
    }
    j += "]}";
  }
  return j + "]}";
}

std::string stop_report::text() const {
  std::string t = undelivered == 0 ? "nothing undelivered" : std::to_string(undelivered) + " messages undelivered:";
  for (std::size_t i = 0; i < rings.size(); ++i)
    t.append(i == 0 ? " " : ", ")
        .append(std::to_string(rings[i].messages))
        .append(" in ring '")
        .append(rings[i].ring)
        .append("'");
  for (const auto& h : lost_in)
    t.append("; ")
        .append(std::to_string(h.messages))
        .append(" lost in stage '")
        .append(h.stage)
        .append("' (held by it when it failed)");
  return t;
}

} // namespace ringpipe
