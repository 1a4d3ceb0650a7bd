#pragma once
// How big the next chunk of a dynamic partition is: a pure function of what the scheduler knows,
// so that the rule is tested without devices.

#include <ringpipe/partition.hpp>

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

namespace ringpipe::detail {

/// What the scheduler knows of one device of the run.
struct lane_speed {
  std::string pool;   ///< lanes of one pool run on the same cores
  double rate = 1;    ///< items per second (measured, or the prior)
  bool known = false; ///< measured by enough chunks
  bool alive = true;
  std::size_t device = 0; ///< its index in the topology
};

/// A device's recent chunks and the speed they show: their items over their seconds, so that a
/// chunk counts by its size. Each chunk pays a fixed cost (enqueue, wake-up, completion callback);
/// a median of per-chunk speeds let the small chunks at a run's end, where that cost dominates,
/// make a fast device look slower than one measured on big chunks only. The last `window` chunks
/// are kept, and older ones until the newer ones together hold twice their items (at most eight
/// times `window` in all). A device's first chunk is its warm-up: it pays the kernel's compile
/// (PoCL and llvmpipe compile at the first launch; 250 ms against 1 ms with a cold cache) and
/// first-touch page faults, so it stands for the speed only until a second chunk has ended.
class speed_record {
public:
  void add(std::size_t items, double seconds, std::size_t window);
  /// Items per second (0 before any chunk).
  double items_per_second() const;
  /// Chunks the speed is taken from now.
  std::size_t chunks() const { return chunks_.size(); }
  /// Chunks ended on the device, the warm-up included.
  std::size_t ended() const { return ended_; }
  /// Drops the chunks the speed is taken from: the next one gives it alone (idle_remeasure.hpp).
  void forget() {
    chunks_.clear();
    items_ = 0;
    seconds_ = 0;
  }

private:
  struct chunk {
    std::size_t items;
    double seconds;
  };
  std::deque<chunk> chunks_;
  std::size_t items_ = 0;
  double seconds_ = 0;
  std::size_t ended_ = 0;
};

/// The next chunk for lane `l`, with `remaining` of `n` indices not yet handed out. Until every
/// alive lane's speed is known: about n * share / first_chunks (small chunks to learn from; a
/// guided share from a speed not yet known, such as a first chunk slowed by a compile, could give
/// one device half the range). Then guided: remaining * share / window, so chunks shrink and the
/// devices end together. A lane's share is its rate over the sum of each pool's fastest alive
/// rate (one device of a pool runs at a time). At least min_chunk, rounded down to a multiple of
/// `local` (at least `local`), at most `remaining` rounded down to one: the rest, fewer than
/// `local`, is the last chunk, so every other runs in the lane's work-group size.
std::size_t dynamic_chunk_size(const std::vector<lane_speed>& lanes, std::size_t l, std::size_t n,
                               std::size_t remaining, const dynamic_partition& d, std::size_t window,
                               std::size_t local);

/// Static ranges as launched: each one whose size is not a multiple of `local` becomes a chunk that
/// is and the rest (fewer than `local` items). Implementations pick a small work-group for a size
/// without a large power-of-two factor: an llvmpipe piece of 349,525 items ran 9x slower than the
/// same items in a rounded chunk and a short one.
std::deque<index_range> aligned_chunks(const std::vector<index_range>& ranges, std::size_t local);

} // namespace ringpipe::detail
