#pragma once
// The copy bandwidth matrix: for every ordered pair of ends (the host and each device) and a few
// sizes, what an array copy costs on the path choose_copy() gives, beside a host memcpy of the
// same size measured in the same run (throughput on a shared machine varies from run to run: read
// the ratio). ringpipe-info --measure prints it; ringpipe-bench topic `links` records it.

#include <ringpipe/runtime.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ringpipe {

struct copy_measurement {
  std::string from; ///< "host" or a device label
  std::string to;
  std::size_t from_index = 0; ///< 0 the host, d + 1 device d
  std::size_t to_index = 0;
  copy_path path = copy_path::shared;
  std::size_t bytes = 0;
  double p50_us = 0;          ///< median time of one copy
  double gb_per_s = 0;        ///< bytes / p50
  double memcpy_gb_per_s = 0; ///< a host memcpy of the same size, same run
};

struct copy_bandwidth_options {
  std::vector<std::size_t> sizes = {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{64} << 20};
  /// Copies timed per size: more for small sizes, at least 3.
  std::size_t budget_bytes = std::size_t{1} << 30;
};

/// Measures every ordered pair of ends (host -> host excluded: that is the memcpy reference).
std::vector<copy_measurement> measure_copy_bandwidth(runtime& rt, const copy_bandwidth_options& options = {});

/// One matrix per size (GB/s and path per cell, the memcpy reference above it) and, for the
/// smallest size, the latency.
std::string copy_bandwidth_table(const runtime& rt, const std::vector<copy_measurement>& m);

} // namespace ringpipe
