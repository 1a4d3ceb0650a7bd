#pragma once
// A barrier over participants on every rank of an MPI program: each rank builds one with its own
// participants (host threads by name, ring kernels), as every rank builds the same pipeline; no
// participant on any rank starts phase k+1 before every participant on every rank finished phase
// k. Within a rank it is a ringpipe::barrier; its completion step joins the ranks (a nonblocking
// all-reduce on a communicator of its own, so the program's own collectives do not interleave).
// A rank whose barrier fails (a participant that does not arrive in time, fail()) tells the others
// in that phase's exchange, and their barriers fail naming it; a rank that does not answer at all
// fails the others' phase after the timeout and a grace (the timeout again, at most 1 s) in which
// a rank with a late participant of its own can say which it was. Built collectively: every rank constructs it, in
// the same order as its other rank barriers.
//
//   mpi::rank_barrier b(w, {"driver"}, {.name = "step", .timeout = 10s});
//   b.arrive_and_wait(b.participant("driver"));   // released once every rank's driver arrived

#include <ringpipe/barrier.hpp>
#include <ringpipe/mpi/world.hpp>
#include <ringpipe/pipeline_barrier.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace ringpipe::mpi {

class rank_barrier {
public:
  /// The communicator a rank barrier meets the other ranks on. Opening one is collective (every
  /// rank, in the same order as its other rank barriers); a barrier built later on it, where not
  /// every rank is sure to get at the same time (a pipeline's start()), then needs no collective.
  class channel {
  public:
    struct state;
    explicit channel(world& w, std::string_view name);
    std::shared_ptr<state> s;
  };
  /// `options.on_phase`, if any, runs after the ranks have met, on one thread of each rank.
  rank_barrier(world& w, std::vector<barrier_participant> participants, barrier_options options = {});
  /// On `c`, opened beforehand (taken over: a channel serves one barrier).
  rank_barrier(world& w, const channel& c, std::vector<barrier_participant> participants, barrier_options options = {});
  /// Waits (at most the barrier's timeout) for its exchanges still under way, then leaves.
  ~rank_barrier();
  rank_barrier(const rank_barrier&) = delete;
  rank_barrier& operator=(const rank_barrier&) = delete;

  std::size_t participant(std::string_view name) const { return local_->participant(name); }
  [[nodiscard]] barrier_token arrive(std::size_t participant) { return local_->arrive(participant); }
  void wait(const barrier_token& token) { local_->wait(token); }
  void arrive_and_wait(std::size_t participant) { local_->arrive_and_wait(participant); }
  /// Fails the barrier on this rank and, at the phase in progress, on every other rank.
  void fail(std::string_view reason) noexcept { local_->fail(reason); }
  std::uint32_t phase() const noexcept { return local_->phase(); }
  barrier_stats stats() const { return local_->stats(); }
  /// This rank's part, for what takes a ringpipe::barrier.
  barrier& local() noexcept { return *local_; }

private:
  struct exchange;
  std::shared_ptr<exchange> exchange_; // shared with the barrier's completion and failure hooks
  std::unique_ptr<barrier> local_;
};

/// A barrier over the members of a pipeline split over ranks (distributed_pipeline): a kernel
/// stage takes part on the rank it is placed on, a host member on every rank (each rank's thread
/// of that name arrives). Every rank declares it alike, as it declares the pipeline; start()
/// builds each rank's part as a rank_barrier, so no member on any rank starts phase k+1 before
/// every member on every rank finished phase k. A rank none of whose members would be there is
/// refused in start() on every rank alike (give the barrier a host member: one on every rank).
///
///   auto step = mpi::add_barrier(w, p, {barrier_member::stage("left", 1),
///                                       barrier_member::stage("right", 1), "driver"});
pipeline_barrier add_barrier(world& w, pipeline& p, std::vector<barrier_member> members, barrier_options options = {});

} // namespace ringpipe::mpi
