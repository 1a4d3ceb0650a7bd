// A barrier over ranks: each rank's ringpipe::barrier meets the other ranks in its completion step.

#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/rank_barrier.hpp>

#include <mpi.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>

namespace ringpipe::mpi {

// One all-reduce (MAX) per phase: a rank puts 0 when all its participants arrived, its rank + 1
// when its barrier failed in that phase; so every rank learns of the failed rank (the highest,
// if several) in the same exchange. Each rank takes part in each phase's exchange once.
struct rank_barrier::exchange {
  struct pending { // one exchange: MPI reads and writes these until it completes
    MPI_Request request = MPI_REQUEST_NULL;
    int mine = 0, worst = 0;
  };
  world& w;
  std::string name;
  std::chrono::nanoseconds timeout;
  std::uint32_t first_phase;
  MPI_Comm comm = MPI_COMM_NULL;
  barrier* local = nullptr; // set once the barrier exists, reset before it goes
  std::mutex mutex;         // the two hooks may run on different threads
  std::uint32_t joined = 0; // phases this rank has taken part in
  std::list<pending> open;  // exchanges under way (a list: MPI holds their addresses)

  exchange(world& world_, std::string n, std::chrono::nanoseconds t, std::uint32_t first)
      : w(world_), name(std::move(n)), timeout(t), first_phase(first) {}
  std::string label(std::uint32_t phase) const {
    return "rank barrier '" + name + "' on rank " + std::to_string(w.rank()) + ", phase " + std::to_string(phase);
  }
  // Takes part in the next phase's exchange with `mine` (the caller holds `mutex`).
  pending& post(int mine) {
    ++joined;
    auto& p = open.emplace_back();
    p.mine = mine;
    std::lock_guard lock(w.lock());
    MPI_Iallreduce(&p.mine, &p.worst, 1, MPI_INT, MPI_MAX, comm, &p.request);
    return p;
  }
  bool complete(pending& p, std::chrono::nanoseconds within) {
    return detail::complete_by(w, p.request, std::chrono::steady_clock::now() + within);
  }
  // The completion step: every participant of this rank arrived at `phase`.
  void meet(std::uint32_t phase) {
    pending* p = nullptr;
    {
      std::lock_guard one(mutex);
      p = &post(0);
    }
    // A rank whose own participant is late fails after the timeout and says so in this exchange:
    // wait a little longer than that, so that the others learn which rank it was.
    const auto within = timeout + std::min<std::chrono::nanoseconds>(timeout, std::chrono::seconds(1));
    if (!complete(*p, within)) // left open: it completes once the others join
      throw error(errc::timeout,
                  label(phase) + ": not every rank arrived within " + std::to_string(within.count() / 1000000) + " ms");
    const int worst = p->worst;
    {
      std::lock_guard one(mutex);
      open.remove_if([p](const pending& x) { return &x == p; });
    }
    if (worst != 0)
      throw error(errc::cancelled, label(phase) + ": the barrier failed on rank " + std::to_string(worst - 1));
  }
  // The barrier failed here: the other ranks learn it in the exchange of the phase in progress,
  // unless this rank took part in it already (its own completion step failed).
  void failed() {
    std::lock_guard one(mutex);
    if (local == nullptr || joined > local->phase() - first_phase) return;
    post(w.rank() + 1);
  }
};

struct rank_barrier::channel::state {
  MPI_Comm comm = MPI_COMM_NULL;
  world* w = nullptr;
  ~state() {
    if (comm == MPI_COMM_NULL) return; // taken by a barrier
    std::lock_guard lock(w->lock());
    MPI_Comm_free(&comm);
  }
};

rank_barrier::channel::channel(world& w, std::string_view name) : s(std::make_shared<state>()) {
  s->w = &w;
  std::lock_guard lock(w.lock());
  if (MPI_Comm_dup(MPI_COMM_WORLD, &s->comm) != MPI_SUCCESS)
    throw error(errc::remote_failed, "rank barrier '" + std::string(name) + "': MPI_Comm_dup failed");
}

rank_barrier::rank_barrier(world& w, std::vector<barrier_participant> participants, barrier_options options)
    : rank_barrier(w, channel(w, options.name), std::move(participants), std::move(options)) {}

rank_barrier::rank_barrier(world& w, const channel& c, std::vector<barrier_participant> participants,
                           barrier_options options)
    : exchange_(std::make_shared<exchange>(w, options.name, options.timeout, options.first_phase)) {
  if (c.s->comm == MPI_COMM_NULL)
    throw error(errc::invalid_argument, "rank barrier '" + options.name + "': its channel served a barrier already");
  exchange_->comm = std::exchange(c.s->comm, MPI_COMM_NULL);
  auto user = std::move(options.on_phase);
  std::weak_ptr<exchange> ex = exchange_;
  options.on_phase = [ex, user](std::uint32_t phase) {
    if (auto e = ex.lock()) e->meet(phase);
    if (user) user(phase);
  };
  options.on_failure = [ex](const error&) {
    if (auto e = ex.lock()) e->failed();
  };
  local_ = std::make_unique<barrier>(std::move(participants), std::move(options));
  std::lock_guard one(exchange_->mutex);
  exchange_->local = local_.get();
}

rank_barrier::~rank_barrier() {
  {
    std::lock_guard one(exchange_->mutex);
    exchange_->local = nullptr;
  }
  local_.reset();
  auto& e = *exchange_;
  bool all_done = true;
  for (auto& p : e.open)
    all_done = e.complete(p, e.timeout) && all_done;
  // An exchange the other ranks never joined stays under way: its communicator and buffers are
  // left to MPI's finalisation rather than freed under it.
  if (!all_done) {
    new std::shared_ptr<exchange>(exchange_); // NOLINT: kept for MPI, on purpose
    return;
  }
  std::lock_guard lock(e.w.lock());
  MPI_Comm_free(&e.comm);
}

pipeline_barrier add_barrier(world& w, pipeline& p, std::vector<barrier_member> members, barrier_options options) {
  barrier_builder builder;
  // The rank of a member (-1: a host member, on every rank), known once the pipeline's ranks are.
  const auto rank_of = [&p](const barrier_member& m) { return m.seat_arg ? p.rank_of(m.name) : -1; };
  builder.takes_part = [&w, rank_of](const barrier_member& m) {
    const int r = rank_of(m);
    return r < 0 || r == w.rank();
  };
  // Opened now, as every rank declares the barrier: start() then makes no collective call that a
  // rank whose part failed to start would never make.
  const rank_barrier::channel channel(w, options.name);
  builder.build = [&w, members, rank_of, channel](std::vector<barrier_participant> here, barrier_options o) {
    // A rank with no member would never arrive: refused alike on every rank (each knows them all).
    std::vector<bool> has(static_cast<std::size_t>(w.size()), false);
    for (const auto& m : members) {
      const int r = rank_of(m);
      if (r < 0)
        std::fill(has.begin(), has.end(), true);
      else
        has[static_cast<std::size_t>(r)] = true;
    }
    std::string none;
    for (std::size_t r = 0; r < has.size(); ++r)
      if (!has[r]) none += (none.empty() ? "rank " : ", rank ") + std::to_string(r);
    if (!none.empty())
      throw error(errc::invalid_pipeline, none + " would hold none of its members, and never arrive (a host member "
                                                 "takes part on every rank)");
    auto joined = std::make_shared<rank_barrier>(w, channel, std::move(here), std::move(o));
    return std::shared_ptr<barrier>(joined, &joined->local()); // the rank barrier owns its part
  };
  return add_barrier(p, std::move(members), std::move(options), std::move(builder));
}

} // namespace ringpipe::mpi
