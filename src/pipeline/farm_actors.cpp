// A farm's host stages (src/actor/farm.hpp), given what the declaration does not hold: the
// replicas' names and their devices' compute units (the dealer's speeds before any is measured).
#include "runner.hpp"

#include "../actor/strand_executor.hpp"

#include <algorithm>

namespace ringpipe::detail {

std::shared_ptr<host_stage> runner::farm_actor(const stage_decl& s, std::uint32_t batch) const {
  auto executor = std::make_shared<strand_executor>(rt_.io());
  std::vector<std::string> replicas;
  if (s.kind == stage_kind::merger) {
    for (const auto ei : s.in_edges)
      replicas.push_back(g_.stages[g_.edges[ei].from].name);
    return std::make_shared<farm_merger>(std::move(executor), s.name, batch, s.farm, s.farm_opts.ordered,
                                         std::move(replicas));
  }
  std::vector<double> capability;
  for (std::size_t k = 0; k < s.out_edges.size(); ++k) {
    replicas.push_back(g_.stages[g_.edges[s.out_edges[k]].to].name);
    capability.push_back(std::max(1u, rt_.devices()[s.farm_opts.devices.at(k)].info().compute_units));
  }
  return std::make_shared<farm_dealer>(std::move(executor), s.name, batch, s.farm, s.farm_opts, std::move(capability),
                                       std::move(replicas));
}

} // namespace ringpipe::detail
