#pragma once
// What a stop of a pipeline over several ranks left undelivered (distributed_pipeline::stop):
// this rank's own report, every rank's totals, and the messages a sender let go of that its
// receiver never took (in MPI when the links ended). Every message a source produced before the
// stop was delivered, or is counted here exactly once.

#include <ringpipe/metrics.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringpipe::mpi {

struct distributed_stop_report {
  /// This rank's part: the rings it holds (its ports' included) and its failed stages.
  stop_report here;
  struct rank_count {
    std::uint64_t undelivered = 0; ///< in the rank's rings, less what the receiver already took
    std::uint64_t lost = 0;        ///< held by the rank's failed stages
  };
  /// Every rank's totals, by rank. A send abandoned after its receiver had taken the messages
  /// leaves them in the sender's ring as well: they are counted on the receiving side only.
  std::vector<rank_count> ranks;
  /// One connection between ranks whose sender let go of messages its receiver never took.
  struct transit {
    std::size_t index = 0; ///< cross_rank_link::index
    int from_rank = 0, to_rank = 0;
    std::uint64_t messages = 0;
  };
  std::vector<transit> in_transit;
  /// Every rank reported (otherwise `ranks` and `in_transit` are empty and `missing` says why).
  bool complete = false;
  std::string missing;

  /// Over every rank and link (only this rank's part when not complete).
  std::uint64_t undelivered() const noexcept;
  std::uint64_t lost() const noexcept;
  /// "12 messages undelivered over 3 ranks: rank 0: 5, rank 1: 7, rank 2: 0; 0 in transit
  /// between ranks", then this rank's own report.
  std::string text() const;
};

namespace detail {
/// Fills `report` (but `here`) from the ranks' summed counts: per connection [sent, received,
/// from rank + 1, to rank + 1], then per rank [undelivered, lost].
void settle_counts(std::span<const std::uint64_t> counts, std::size_t connections, std::size_t ranks,
                   distributed_stop_report& report);
} // namespace detail

} // namespace ringpipe::mpi
