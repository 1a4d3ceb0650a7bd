#pragma once
// One rank's part of a pipeline declared on every rank: its own stages, and a port for each
// connection to a stage on another rank.

#include "graph.hpp"

#include <ringpipe/cross_rank.hpp>

#include <vector>

namespace ringpipe::detail {

struct rank_part {
  graph local;
  std::vector<cross_rank_link> links; // rings not set
  std::vector<std::size_t> ports;     // links[i]'s port: a stage of `local`
};

/// Validates the whole graph (every rank refuses the same mistakes), places the stages on any_rank
/// (place_on_ranks), then keeps the stages on `rank` and adds the ports. Refuses
/// (errc::invalid_pipeline) a stage on a rank outside [0, ranks) and a rank with no stage.
rank_part project(const graph& g, int rank, int ranks, const std::vector<double>& weights);

/// Gives every stage on any_rank a rank (rank_placement.cpp); `weights` per rank (its devices;
/// empty or all zero: equal).
void place_on_ranks(graph& g, int ranks, const std::vector<double>& weights);

} // namespace ringpipe::detail
