// A barrier over ranks: each rank's ringpipe::barrier meets the other ranks in its completion step.

#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/rank_barrier.hpp>

#include <mpi.h>

#include <list>
#include <mutex>

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

rank_barrier::rank_barrier(world& w, std::vector<barrier_participant> participants, barrier_options options)
    : exchange_(std::make_shared<exchange>(w, options.name, options.timeout, options.first_phase)) {
  {
    std::lock_guard lock(w.lock());
    if (MPI_Comm_dup(MPI_COMM_WORLD, &exchange_->comm) != MPI_SUCCESS)
      throw error(errc::remote_failed, "rank barrier '" + options.name + "': MPI_Comm_dup failed");
  }
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

} // namespace ringpipe::mpi
