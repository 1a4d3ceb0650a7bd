#pragma once
// One pipeline over several processes (ranks): every rank declares the same pipeline, places its
// stages with pipeline::on_rank, and runs only its own. A connection between stages on two ranks
// becomes a port at each end, an outlet on the sending rank and an inlet on the receiving one,
// which the code joining the processes (ringpipe::mpi::distributed_pipeline) drains and fills.

#include <ringpipe/ring.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace ringpipe {

/// pipeline::on_rank(stage, any_rank): the rank is chosen when the ranks are known. Kernels (a farm
/// whole) are spread over the ranks in contiguous runs along the stream, in proportion to each
/// rank's devices; a host stage joins the rank of the stage it takes from (else, feeds).
inline constexpr int any_rank = -1;

/// This rank's end of one connection between stages on two ranks.
struct cross_rank_link {
  /// The same on every rank: the connection's place among the pipeline's connections between
  /// ranks, in the order they were declared.
  std::size_t index = 0;
  std::string from, to; ///< the stages it joins
  int from_rank = 0, to_rank = 0;
  bool sending = false;              ///< this rank holds `from`: its port is an outlet
  std::string port;                  ///< "a->b@rank1" on the sending rank, "a@rank0->b" on the receiving
  std::size_t message_size = 0;      ///< bytes per message
  std::shared_ptr<ring_buffer> ring; ///< the port's ring, once the pipeline started
  /// Wakes the stage beside the port (it sleeps while the ring is empty, or full): call it after
  /// putting messages in an inlet's ring or taking them from an outlet's. Null: none to wake.
  std::function<void()> wake_beside;
  /// The other rank.
  int peer() const noexcept { return sending ? to_rank : from_rank; }
};

} // namespace ringpipe
