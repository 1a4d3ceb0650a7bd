#pragma once
// Splits of an index range [0, n) over devices, passed as values (as task libraries pass their
// partitioners): block, cyclic and weighted are static (the split is known before anything runs);
// dynamic hands out chunks as devices finish, sized by their measured speed (parallel_for).
//
//   auto parts = ringpipe::split(ringpipe::weighted_partition{{2.0, 1.0}}, 1000, 2);
//   // parts[0] = {[0, 667)}, parts[1] = {[667, 1000)}: every index exactly once

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace ringpipe {

/// The indices [first, last).
struct index_range {
  std::size_t first = 0;
  std::size_t last = 0;
  std::size_t size() const noexcept { return last - first; }
  bool empty() const noexcept { return last == first; }
  bool operator==(const index_range&) const = default;
};

/// Contiguous ranges whose sizes differ by at most one, the larger ones first.
struct block_partition {};

/// Round-robin: blocks of `grain` indices dealt to the parts in turn (the last block may be short).
struct cyclic_partition {
  std::size_t grain = 1;
};

/// Contiguous ranges with sizes proportional to `weights` (one per part, finite, >= 0, not all
/// zero), rounded by largest remainder so that they add up to n exactly.
struct weighted_partition {
  std::vector<double> weights;
};

/// Chunks handed to each device as it finishes the last, sized by its measured speed (the items of
/// its recent chunks over their seconds, so that neither one slow outlier nor the fixed cost of
/// small chunks starves it) and shrinking toward the end so the
/// devices finish together. Only parallel_for can run it: the split depends on the run.
struct dynamic_partition {
  std::size_t min_chunk = 4096;  ///< no chunk smaller, except the last
  std::size_t first_chunks = 16; ///< the first chunk of each device is about n / (devices * first_chunks)
  std::size_t in_flight = 2;     ///< chunks queued on a device at once, so it never waits for the host
  std::size_t speed_window = 5;  ///< chunks the speed is taken over (at least)
};

using partitioner = std::variant<dynamic_partition, block_partition, cyclic_partition, weighted_partition>;

/// "block", "cyclic (grain 64)", "weighted (2, 1)", "dynamic".
std::string describe(const partitioner& p);
/// "[first, last)".
std::string to_string(index_range r);

/// The ranges each of `parts` parts owns, in index order; every index of [0, n) in exactly one.
/// Refused (errc::invalid_argument, naming the partition) for parts == 0, a zero grain, weights
/// of the wrong count or sign, and dynamic_partition (it splits while running).
std::vector<std::vector<index_range>> split(const partitioner& p, std::size_t n, std::size_t parts);

} // namespace ringpipe
