#pragma once
// What a world records for its remote links. Link numbers serve again (a program that runs one
// pipeline after another over the same ranks), so each opening of a number with a peer is a new
// generation, counted alike on both ranks, and every frame carries its generation: a frame of a
// link that ended (a failed link leaves frames in flight) is dropped, and one of a link opened on
// the peer but not here yet is kept for it.

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace ringpipe::mpi::detail {

struct link_book {
  std::map<std::pair<int, int>, std::uint32_t> opened;                                     // (link, peer)
  std::map<std::tuple<int, int, std::uint32_t>, std::deque<std::vector<std::byte>>> early; // (peer, tag, generation)
  // A data frame's messages follow its header on the tag as an MPI message of their own: after a
  // header of another generation, the next message from (peer, tag) belongs to that generation.
  std::map<std::pair<int, int>, std::uint32_t> payload_next;
  /// Transfers an end gave up on (a failed or destroyed link) that MPI may still be carrying out:
  /// a rendezvous send reads its messages from the ring's slots, a matched receive writes into
  /// them, whatever MPI_Cancel says. Each keeps that memory (and the frame header) until MPI
  /// completes it, tested on later turns of every end and before MPI_Finalize; a ring freed after
  /// its link failed was read by the peer (EFAULT) and by this rank (a segfault in Open MPI's
  /// send path) under load.
  struct orphan {
    std::vector<MPI_Request> requests;
    std::vector<std::byte> header;
    std::shared_ptr<const void> memory;
  };
  std::vector<orphan> orphans;
  std::atomic<bool> has_orphans{false}; // read without the lock: most turns find none
};

} // namespace ringpipe::mpi::detail
