#include <ringpipe/plan.hpp>

#include "planner.hpp"

#include <algorithm>

namespace ringpipe {

const pipeline_plan::link* pipeline_plan::find_link(const std::string& from, const std::string& to) const {
  for (const auto& l : links)
    if (l.from == from && l.to == to) return &l;
  return nullptr;
}

const pipeline_plan::stage* pipeline_plan::find_stage(const std::string& name) const {
  for (const auto& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

std::size_t pipeline_plan::staged_links() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(links.begin(), links.end(), [](const link& l) { return l.kind == link_kind::staged; }));
}

std::string pipeline_plan::text() const {
  std::string t = objective.empty() ? std::string()
                                    : "objective: " + objective +
                                          (objective_reason.empty() ? "" : " (" + objective_reason + ")") + "\n";
  if (!parking_reason.empty()) t += parking_reason + "\n";
  if (!idle_polling_reason.empty()) t += idle_polling_reason + "\n";
  if (host_stage_threads + copying_proxy_threads > 0)
    t += detail::describe_host_threads(host_stage_threads, copying_proxy_threads, one_io_thread_reason) + "\n";
  for (const auto& s : stages) {
    t += std::string(to_string(s.kind)) + " '" + s.name + "'";
    if (s.device) t += " on device " + std::to_string(*s.device);
    if (s.mode) t += ", " + std::string(to_string(*s.mode)) + (s.mode_from_objective ? " (objective)" : " (forced)");
    if (s.leaves_when_idle) t += ", leaves when idle";
    for (const auto& f : s.fused_with)
      t += ", fused with '" + f + "'";
    if (!s.fused_into.empty()) t += ": runs fused in the kernel of '" + s.fused_into + "'";
    t += "\n";
  }
  for (const auto& l : links)
    t += l.from + " -> " + l.to + ": " + std::string(to_string(l.kind)) + (l.forced ? " (forced)" : "") +
         (l.mover ? ", through a host mover" : "") +
         (l.capacity != 0 ? ", " + std::to_string(l.capacity) + " slots" : "") + "\n";
  if (!device_groups.empty()) {
    t += "device groups (direct links within a group):";
    for (const auto& g : device_groups) {
      t += " {";
      for (std::size_t k = 0; k < g.size(); ++k)
        t += (k ? ", " : "") + std::to_string(g[k]);
      t += "}";
    }
    t += "\n";
  }
  t += std::to_string(staged_links()) + " of " + std::to_string(links.size()) +
       " links copy their messages through host memory (staged)\n";
  return t;
}

} // namespace ringpipe
