// The pipeline as a Graphviz graph (pipeline::dot): stages grouped by where they run (the host,
// each device; this rank's part inside a box when the pipeline is split over ranks), links
// labelled with their kind and ring size and, once the pipeline runs, what they carried.

#include "../core/text.hpp"
#include "pipeline_impl.hpp"

#include <ringpipe/runtime.hpp>

#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

namespace ringpipe {

namespace {

using detail::amount;
using detail::dot_quoted;

std::string stage_label(const pipeline_plan::stage& s, const stage_metrics* m) {
  std::string label = s.name + "\n";
  if (s.kind == stage_kind::kernel)
    label += "kernel, " + std::string(m && !m->mode.empty() ? m->mode
                                      : s.mode              ? to_string(*s.mode)
                                                            : "mode chosen at start");
  else
    label += to_string(s.kind);
  if (!s.fused_into.empty()) label += " (fused into " + s.fused_into + ")";
  if (m != nullptr) label += "\n" + amount(m->msgs_in, "") + " in, " + amount(m->msgs_out, "") + " out, " + m->state;
  return label;
}

std::string stage_of(const std::string& port) { return port.substr(0, port.rfind('.')); }

} // namespace

std::string pipeline::dot() const {
  std::string title = "pipeline '" + name() + "'";
  if (impl_->ranks != 0) title += ", rank " + std::to_string(impl_->rank) + " of " + std::to_string(impl_->ranks);
  if (const auto objective = dry_run().objective; !objective.empty() && impl_->ranks == 0)
    title += ", objective " + objective; // ranks: in the rank's box
  return dot_header(name(), title) + dot_part("") + "}\n";
}

std::string pipeline::dot_header(const std::string& graph, std::string title) {
  title += "\nlinks: solid direct (shared memory), dashed staged (copied through host memory), dotted fused";
  return "digraph " + dot_quoted(graph) +
         " {\n  rankdir=LR; labelloc=t; fontname=\"Helvetica\"; label=" + dot_quoted(title) +
         ";\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=11];\n"
         "  edge [fontname=\"Helvetica\", fontsize=9];\n";
}

std::string pipeline::dot_part(const std::string& prefix) const {
  const auto plan = dry_run();
  const auto running = metrics();
  const bool started = impl_->run != nullptr;
  const auto& devices = impl_->rt.devices();
  std::ostringstream out;
  std::string tag; // cluster names unique across the parts of one graph
  for (const char c : prefix)
    tag += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::map<std::optional<std::size_t>, std::vector<const pipeline_plan::stage*>> groups; // by device; host first
  for (const auto& s : plan.stages)
    groups[s.device].push_back(&s);
  const std::string indent = impl_->ranks != 0 ? "    " : "  ";
  if (impl_->ranks != 0) {
    std::string label = "rank " + std::to_string(impl_->rank);
    if (!plan.objective.empty()) label += ", objective " + plan.objective;
    out << "  subgraph cluster_" << tag << "rank {\n    label=" << dot_quoted(label) << "; style=dashed;\n";
  }
  std::size_t cluster = 0;
  for (const auto& [device, stages] : groups) {
    const std::string where = !device                    ? "host"
                              : *device < devices.size() ? devices[*device].label()
                                                         : "device #" + std::to_string(*device) + " (not present)";
    out << indent << "subgraph cluster_" << tag << cluster++ << " {\n"
        << indent << "  label=" << dot_quoted(where)
        << "; style=\"rounded,filled\"; fillcolor=" << (device ? "\"#e8f0fe\"" : "\"#f3f3f3\"") << ";\n";
    for (const auto* s : stages) {
      const bool port = s->kind == stage_kind::inlet || s->kind == stage_kind::outlet;
      out << indent << "  " << dot_quoted(prefix + s->name)
          << " [label=" << dot_quoted(stage_label(*s, running.stage(s->name)))
          << (s->kind == stage_kind::kernel ? ", shape=box3d, style=filled, fillcolor=\"#c6dafc\"" : "")
          << (port ? ", shape=cds" : "") << "];\n";
    }
    out << indent << "}\n";
  }
  if (impl_->ranks != 0) out << "  }\n";
  for (const auto& l : plan.links) {
    std::string label = std::string(to_string(l.kind));
    if (l.forced) label += " (forced)";
    if (l.kind != link_kind::fused) label += ", " + std::to_string(l.capacity) + " slots";
    if (const auto* m = running.link(l.from, l.to); m != nullptr && started && l.kind != link_kind::fused)
      label += "\n" + amount(m->messages, "msgs") + ", " + amount(m->bytes, "B");
    const char* style = l.kind == link_kind::staged  ? ", style=dashed, color=\"#b06000\""
                        : l.kind == link_kind::fused ? ", style=dotted"
                                                     : "";
    out << "  " << dot_quoted(prefix + stage_of(l.from)) << " -> " << dot_quoted(prefix + stage_of(l.to))
        << " [label=" << dot_quoted(label) << style << "];\n";
  }
  return out.str();
}

} // namespace ringpipe
