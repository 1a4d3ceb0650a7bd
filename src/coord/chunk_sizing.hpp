#pragma once
// How big the next chunk of a dynamic partition is: a pure function of what the scheduler knows,
// so that the rule is tested without devices.

#include <ringpipe/partition.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ringpipe::detail {

/// What the scheduler knows of one device of the run.
struct lane_speed {
  std::string pool;   ///< lanes of one pool run on the same cores
  double rate = 1;    ///< items per second (measured, or the prior)
  bool known = false; ///< measured by enough chunks
  bool alive = true;
};

/// The next chunk for lane `l`, with `remaining` of `n` indices not yet handed out. Until every
/// alive lane's speed is known: about n * share / first_chunks (small chunks to learn from; a
/// guided share from a speed not yet known, such as a first chunk slowed by a compile, could give
/// one device half the range). Then guided: remaining * share / window, so chunks shrink and the
/// devices end together. A lane's share is its rate over the sum of each pool's fastest alive
/// rate (one device of a pool runs at a time). At least min_chunk, rounded down to a multiple of
/// `local` (at least `local`), at most `remaining`.
std::size_t dynamic_chunk_size(const std::vector<lane_speed>& lanes, std::size_t l, std::size_t n,
                               std::size_t remaining, const dynamic_partition& d, std::size_t window,
                               std::size_t local);

} // namespace ringpipe::detail
