// Ranks for the stages placed on any_rank: kernels (a farm whole) spread over the ranks in
// contiguous runs along the stream, the runs' costs (pipeline::set_cost; 1 per kernel by default)
// in proportion to each rank's weight (its devices); host stages
// join the rank of a stage they exchange messages with. Deterministic: every rank computes the
// same placement from the same declaration and weights, without exchanging it.

#include "../core/farm_names.hpp"
#include "ranks.hpp"

#include <algorithm>
#include <numeric>

namespace ringpipe::detail {

namespace {

// Stages that move together: a farm's dealer, replicas and merger are one group (its name).
std::string group_of(const graph& g, std::size_t i) {
  const auto& n = g.stages[i].name;
  if (const auto farm = farm_of(n); !farm.empty()) return std::string(farm);
  if (const auto at = n.rfind('@'); at != std::string::npos && g.stages[i].is_kernel()) {
    std::string base = n.substr(0, at);
    const auto dealer = dealer_name(base);
    if (std::any_of(g.stages.begin(), g.stages.end(), [&](const stage_decl& s) { return s.name == dealer; }))
      return base;
  }
  return n;
}

// Stages in stream order (Kahn's algorithm; ties in declaration order). validate() refused cycles.
std::vector<std::size_t> stream_order(const graph& g) {
  std::vector<std::size_t> waiting(g.stages.size()), order;
  for (const auto& e : g.edges)
    ++waiting[e.to];
  std::vector<bool> done(g.stages.size());
  while (order.size() < g.stages.size()) {
    std::size_t next = g.stages.size();
    for (std::size_t i = 0; i < g.stages.size() && next == g.stages.size(); ++i)
      if (!done[i] && waiting[i] == 0) next = i;
    if (next == g.stages.size()) break; // a cycle: validate() names it
    done[next] = true;
    order.push_back(next);
    for (const auto& e : g.edges)
      if (e.from == next) --waiting[e.to];
  }
  return order;
}

} // namespace

void place_on_ranks(graph& g, int ranks, const std::vector<double>& weights) {
  std::vector<double> w(static_cast<std::size_t>(ranks), 1.0);
  if (weights.size() == w.size() && std::accumulate(weights.begin(), weights.end(), 0.0) > 0)
    for (std::size_t r = 0; r < w.size(); ++r)
      w[r] = std::max(0.0, weights[r]);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const auto order = stream_order(g);

  // Compute groups (kernels, farms) in stream order, each once, with their kernels' costs.
  std::vector<std::string> groups;
  std::vector<double> costs;
  for (const auto i : order) {
    const auto& s = g.stages[i];
    if (s.rank != any_rank || !(s.is_kernel() || s.kind == stage_kind::dealer)) continue;
    const auto name = group_of(g, i);
    auto at = std::find(groups.begin(), groups.end(), name);
    if (at == groups.end()) {
      groups.push_back(name);
      costs.push_back(0);
      at = groups.end() - 1;
    }
    if (s.is_kernel()) costs[static_cast<std::size_t>(at - groups.begin())] += s.cost;
  }
  const double all = std::accumulate(costs.begin(), costs.end(), 0.0);
  // Group k goes to the rank whose share of the total weight holds the middle of its run of cost.
  double before = 0;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const double at = (before + costs[k] / 2) / all * total;
    before += costs[k];
    int rank = 0;
    for (double below = w[0]; rank + 1 < ranks && below <= at;) // `below`: the weight of ranks 0 to `rank`
      below += w[static_cast<std::size_t>(++rank)];
    for (std::size_t i = 0; i < g.stages.size(); ++i)
      if (g.stages[i].rank == any_rank && group_of(g, i) == groups[k]) g.stages[i].rank = rank;
  }
  // Host stages: the rank of the stage they take from, else of the one they feed; repeated while
  // that places more (a chain of host stages), then rank 0 for any left.
  for (bool placed = true; placed;) {
    placed = false;
    for (const auto i : order) {
      auto& s = g.stages[i];
      if (s.rank != any_rank) continue;
      int found = any_rank;
      for (const auto e : s.in_edges)
        if (found == any_rank) found = g.stages[g.edges[e].from].rank;
      for (const auto e : s.out_edges)
        if (found == any_rank) found = g.stages[g.edges[e].to].rank;
      if (found == any_rank) continue;
      s.rank = found;
      placed = true;
    }
  }
  for (auto& s : g.stages)
    if (s.rank == any_rank) s.rank = 0;
}

} // namespace ringpipe::detail
