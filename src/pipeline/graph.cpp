#include "graph.hpp"

#include <algorithm>

namespace ringpipe::detail {

std::string type_text(const message_type& t) { return t.name + " (" + std::to_string(t.size) + " bytes)"; }

std::size_t graph::find(const std::string& stage) const {
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == stage) return i;
  throw error(errc::invalid_pipeline, "pipeline '" + name + "' has no stage named '" + stage + "'");
}

std::size_t graph::add_stage(std::string stage, stage_kind kind, message_type in, message_type out) {
  if (stage.empty() || stage.find('.') != std::string::npos)
    throw error(errc::invalid_argument, "stage name '" + stage + "' must be non-empty and without '.'");
  for (const auto& s : stages)
    if (s.name == stage)
      throw error(errc::invalid_pipeline, "pipeline '" + name + "' already has a stage '" + stage + "'");
  stage_decl s;
  s.name = std::move(stage);
  s.kind = kind;
  s.in = std::move(in);
  s.out = std::move(out);
  stages.push_back(std::move(s));
  return stages.size() - 1;
}

void graph::connect(std::size_t from, std::size_t to, link_options options) {
  auto& a = stages.at(from);
  auto& b = stages.at(to);
  for (const auto ei : a.out_edges)
    if (edges[ei].to == to)
      throw error(errc::invalid_pipeline, a.out_port() + " is already connected to " + b.in_port());
  edges.push_back({from, to, a.out_port(), b.in_port(), options});
  a.out_edges.push_back(edges.size() - 1);
  b.in_edges.push_back(edges.size() - 1);
}

namespace {

void refuse_cycles(const graph& g) {
  // Depth-first search; the path of the first cycle found is named port by port.
  std::vector<int> color(g.stages.size(), 0);
  std::vector<std::size_t> path;
  std::function<void(std::size_t)> visit = [&](std::size_t v) {
    color[v] = 1;
    for (const auto e : g.stages[v].out_edges) {
      const auto w = g.edges[e].to;
      if (color[w] == 1) {
        std::string cycle;
        auto first = static_cast<std::size_t>(
            std::find_if(path.begin(), path.end(), [&](std::size_t ed) { return g.edges[ed].from == w; }) -
            path.begin());
        path.push_back(e);
        for (; first < path.size(); ++first)
          cycle += "\n  " + g.edges[path[first]].from_port + " -> " + g.edges[path[first]].to_port;
        throw error(errc::invalid_pipeline, "pipeline '" + g.name + "' has a cycle:" + cycle);
      }
      if (color[w] == 0) {
        path.push_back(e);
        visit(w);
        path.pop_back();
      }
    }
    color[v] = 2;
  };
  for (std::size_t v = 0; v < g.stages.size(); ++v)
    if (color[v] == 0) visit(v);
}

} // namespace

void validate(const graph& g) {
  if (g.stages.empty()) throw error(errc::invalid_pipeline, "pipeline '" + g.name + "' has no stages");
  std::string problems;
  for (const auto& s : g.stages) {
    if (!s.in.none() && s.in_edges.empty()) problems += "\n  input port '" + s.in_port() + "' is not connected";
    if (!s.out.none() && s.out_edges.empty()) problems += "\n  output port '" + s.out_port() + "' is not connected";
    if (s.kind == stage_kind::inlet && s.out_edges.size() > 1)
      problems += "\n  inlet '" + s.name + "' feeds " + std::to_string(s.out_edges.size()) +
                  " connections; an inlet feeds one (add a host stage to fan out)";
    if (s.kind == stage_kind::outlet && s.in_edges.size() > 1)
      problems += "\n  outlet '" + s.name + "' is fed by " + std::to_string(s.in_edges.size()) +
                  " connections; an outlet takes one (add a host stage to merge)";
  }
  if (!problems.empty())
    throw error(errc::invalid_pipeline, "pipeline '" + g.name + "' is not fully connected:" + problems);
  refuse_cycles(g);
}

} // namespace ringpipe::detail
