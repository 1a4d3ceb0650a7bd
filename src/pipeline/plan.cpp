#include <ringpipe/plan.hpp>

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

std::string pipeline_plan::text() const {
  std::string t = objective.empty() ? std::string()
                                    : "objective: " + objective +
                                          (objective_reason.empty() ? "" : " (" + objective_reason + ")") + "\n";
  for (const auto& s : stages) {
    t += std::string(to_string(s.kind)) + " '" + s.name + "'";
    if (s.device) t += " on device " + std::to_string(*s.device);
    if (s.mode) t += ", " + std::string(to_string(*s.mode)) + (s.mode_from_objective ? " (objective)" : " (forced)");
    for (const auto& f : s.fused_with)
      t += ", fused with '" + f + "'";
    if (!s.fused_into.empty()) t += ": runs fused in the kernel of '" + s.fused_into + "'";
    t += "\n";
  }
  for (const auto& l : links)
    t += l.from + " -> " + l.to + ": " + std::string(to_string(l.kind)) + (l.forced ? " (forced)" : "") +
         (l.mover ? ", through a host mover" : "") +
         (l.capacity != 0 ? ", " + std::to_string(l.capacity) + " slots" : "") + "\n";
  return t;
}

} // namespace ringpipe
