#pragma once
// A pipeline as declared: stages, their ports and the connections between them, and the checks
// that need nothing but the declaration (connected ports, one-way flow, inlets and outlets).

#include "../actor/farm.hpp"

#include <ringpipe/pipeline.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ringpipe::detail {

struct stage_decl {
  std::string name;
  stage_kind kind = stage_kind::host;
  message_type in, out;
  generate_run generate;
  transform_run transform;
  consume_run consume;
  kernel_spec spec;
  placement where;
  kernel_options kernel_opts;
  fan_out policy = fan_out::broadcast;
  std::vector<std::size_t> in_edges, out_edges;
  // A farm's dealer and merger share its ledger; the dealer keeps the options.
  std::shared_ptr<farm_ledger> farm;
  farm_options farm_opts;
  int rank = 0;      // the process it runs on (pipeline::on_rank)
  double cost = 1.0; // its share of the work, for placing kernels on any_rank (pipeline::set_cost)

  std::string in_port() const { return name + ".in"; }
  std::string out_port() const { return name + ".out"; }
  bool is_kernel() const { return kind == stage_kind::kernel; }
};

struct edge_decl {
  std::size_t from = 0, to = 0;
  std::string from_port, to_port;
  link_options options;
  std::string ring_name() const { return from_port + "->" + to_port; }
};

struct graph {
  std::string name;
  std::vector<stage_decl> stages;
  std::vector<edge_decl> edges;
  // Set by the layers above (pipeline::on_kernels_built, add_barrier_metrics).
  std::vector<std::function<void(const built_kernels&)>> on_kernels_built;
  std::vector<std::function<barrier_stats()>> barrier_metrics;
  std::vector<std::string> resident; // kernel stages kept persistent (pipeline::keep_resident)

  /// Throws errc::invalid_pipeline naming the pipeline when there is no such stage.
  std::size_t find(const std::string& stage) const;
  std::size_t add_stage(std::string stage, stage_kind kind, message_type in, message_type out);
  void connect(std::size_t from, std::size_t to, link_options options);
};

/// Refuses (errc::invalid_pipeline, naming ports) an empty pipeline, unconnected ports, an inlet
/// feeding or an outlet fed by more than one connection, and cycles.
void validate(const graph& g);

std::string type_text(const message_type& t);

} // namespace ringpipe::detail
