// One pipeline over several processes: placing stages on ranks, and each rank's part of it.

#include "ranks.hpp"
#include "../core/farm_names.hpp"
#include "pipeline_impl.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace ringpipe {

namespace detail {

namespace {

std::string rank_text(int r) { return "rank " + std::to_string(r); }

// A farm `name` is its dealer ("name:deal"), its replicas ("name@k", kernels) and its merger.
bool is_farm(const graph& g, const std::string& name) {
  const auto dealer = dealer_name(name);
  return std::any_of(g.stages.begin(), g.stages.end(), [&](const stage_decl& s) { return s.name == dealer; });
}
bool is_replica_of(const stage_decl& s, const std::string& farm) {
  return s.is_kernel() && named_as_replica_of(s.name, farm);
}

// A port stage standing for `other` (a stage on another rank) at one end of `e`.
std::size_t add_port(graph& local, const graph& g, const edge_decl& e, bool sending) {
  const auto& a = g.stages[e.from];
  const auto& b = g.stages[e.to];
  if (sending)
    return local.add_stage(a.name + "->" + b.name + "@rank" + std::to_string(b.rank), stage_kind::outlet, a.out,
                           message_type::of<no_message>());
  return local.add_stage(a.name + "@rank" + std::to_string(a.rank) + "->" + b.name, stage_kind::inlet,
                         message_type::of<no_message>(), b.in);
}

} // namespace

rank_part project(const graph& declared, int rank, int ranks, const std::vector<double>& weights) {
  validate(declared);
  graph g = declared;
  place_on_ranks(g, ranks, weights);
  const std::string what = "pipeline '" + g.name + "' (" + rank_text(rank) + " of " + std::to_string(ranks) + ")";
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw error(errc::invalid_argument, what + ": no such rank; ranks are 0 to " + std::to_string(ranks - 1));
  std::string outside;
  for (const auto& s : g.stages)
    if (s.rank >= ranks) outside += "\n  stage '" + s.name + "' on " + rank_text(s.rank);
  if (!outside.empty())
    throw error(errc::invalid_pipeline, what +
                                            ": stages placed on ranks the program does not have (run it on more "
                                            "processes, or place them on ranks 0 to " +
                                            std::to_string(ranks - 1) + "):" + outside);
  rank_part part;
  part.local.name = g.name;
  part.local.on_kernels_built = g.on_kernels_built;
  part.local.barrier_metrics = g.barrier_metrics;
  std::map<std::size_t, std::size_t> local_id;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    if (g.stages[i].rank != rank) continue;
    local_id[i] = part.local.stages.size();
    part.local.stages.push_back(g.stages[i]);
    part.local.stages.back().in_edges.clear();
    part.local.stages.back().out_edges.clear();
  }
  if (part.local.stages.empty())
    throw error(errc::invalid_pipeline, what + ": no stage is placed on this rank (pipeline::on_rank); run the "
                                               "program on fewer processes or place a stage here");
  for (const auto& r : g.resident)
    if (g.stages[g.find(r)].rank == rank) part.local.resident.push_back(r);
  std::size_t crossing = 0;
  for (const auto& e : g.edges) {
    const bool has_from = local_id.count(e.from) != 0, has_to = local_id.count(e.to) != 0;
    if (has_from && has_to) {
      part.local.connect(local_id[e.from], local_id[e.to], e.options);
    } else if (has_from || has_to) {
      const auto port = add_port(part.local, g, e, has_from);
      if (has_from)
        part.local.connect(local_id[e.from], port, e.options);
      else
        part.local.connect(port, local_id[e.to], e.options);
      const auto& a = g.stages[e.from];
      const auto& b = g.stages[e.to];
      part.links.push_back({crossing, a.name, b.name, a.rank, b.rank, has_from, part.local.stages[port].name,
                            a.out.size, nullptr, nullptr});
      part.ports.push_back(port);
    }
    if (g.stages[e.from].rank != g.stages[e.to].rank) ++crossing;
  }
  return part;
}

} // namespace detail

void pipeline::on_rank(const std::string& stage, int rank) {
  auto& g = impl_->g;
  const bool farm = detail::is_farm(g, stage);
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < g.stages.size(); ++i) {
    const auto& n = g.stages[i].name;
    if (n == stage || (farm && (n == detail::dealer_name(stage) || n == detail::merger_name(stage) ||
                                detail::is_replica_of(g.stages[i], stage))))
      ids.push_back(i);
  }
  if (ids.empty()) g.find(stage); // throws, naming the pipeline
  if (impl_->run) throw error(errc::invalid_pipeline, "stage '" + stage + "' placed on a rank after start()");
  if (rank < 0 && rank != any_rank)
    throw error(errc::invalid_argument, "stage '" + stage + "': rank " + std::to_string(rank) + " < 0");
  for (const auto id : ids)
    def(id).rank = rank;
}

void pipeline::set_cost(const std::string& stage, double cost) {
  auto& g = impl_->g;
  const std::string what = "pipeline '" + name() + "': stage '" + stage + "'";
  if (impl_->run) throw error(errc::invalid_pipeline, what + ": its cost set after start()");
  if (!(cost > 0) || !std::isfinite(cost))
    throw error(errc::invalid_argument, what + ": a cost must be a positive number, not " + std::to_string(cost));
  std::vector<std::size_t> replicas;
  const bool farm = detail::is_farm(g, stage);
  for (std::size_t i = 0; farm && i < g.stages.size(); ++i)
    if (detail::is_replica_of(g.stages[i], stage)) replicas.push_back(i);
  if (replicas.empty()) {
    auto& s = def(g.find(stage));
    if (!s.is_kernel())
      throw error(errc::invalid_argument, what + " is not a kernel stage: only kernels are placed by cost");
    s.cost = cost;
    return;
  }
  for (const auto i : replicas)
    def(i).cost = cost / static_cast<double>(replicas.size());
}

void pipeline::on_rank_id(std::size_t stage, int rank) {
  const auto& s = def(stage);
  // A farm's ref is its dealer ("name:deal"): the whole farm moves.
  on_rank(s.kind == stage_kind::dealer ? std::string(detail::farm_of(s.name)) : s.name, rank);
}

void pipeline::set_ranks(int rank, int ranks, std::vector<double> weights) {
  if (impl_->run) throw error(errc::invalid_pipeline, "pipeline '" + name() + "': set_ranks after start()");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw error(errc::invalid_argument, "pipeline '" + name() + "': rank " + std::to_string(rank) + " of " +
                                            std::to_string(ranks) + " does not exist");
  if (!weights.empty() && weights.size() != static_cast<std::size_t>(ranks))
    throw error(errc::invalid_argument, "pipeline '" + name() + "': " + std::to_string(weights.size()) +
                                            " rank weights for " + std::to_string(ranks) + " ranks");
  impl_->rank = rank;
  impl_->ranks = ranks;
  impl_->rank_weights = std::move(weights);
}

bool pipeline::has_any_rank() const {
  const auto& st = impl_->g.stages;
  return std::any_of(st.begin(), st.end(), [](const detail::stage_decl& s) { return s.rank == any_rank; });
}

int pipeline::rank_of(const std::string& stage) const {
  const auto& st = impl_->g.stages;
  // A farm by its name: its dealer (the whole farm runs on one rank).
  const bool farm = std::none_of(st.begin(), st.end(), [&](const detail::stage_decl& s) { return s.name == stage; }) &&
                    detail::is_farm(impl_->g, stage);
  const auto id = impl_->g.find(farm ? detail::dealer_name(stage) : stage);
  if (impl_->ranks == 0 || impl_->g.stages[id].rank != any_rank) return impl_->g.stages[id].rank;
  auto g = impl_->g;
  detail::place_on_ranks(g, impl_->ranks, impl_->rank_weights);
  return g.stages[id].rank;
}

std::vector<cross_rank_link> pipeline::cross_rank_links() const {
  if (impl_->ranks == 0) return {};
  if (!impl_->part) return detail::project(impl_->g, impl_->rank, impl_->ranks, impl_->rank_weights).links;
  auto links = impl_->part->links;
  for (std::size_t i = 0; i < links.size(); ++i) {
    links[i].ring = impl_->run->port(impl_->part->ports[i]);
    links[i].wake_beside = impl_->run->port_waker(impl_->part->ports[i]);
  }
  return links;
}

} // namespace ringpipe
