// This rank's part of a pipeline declared on every rank, joined to the others by remote links.

#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/distributed_pipeline.hpp>

#include <array>
#include <memory>
#include <variant>

namespace ringpipe::mpi {

struct distributed_pipeline::link_end {
  std::variant<remote_sender, remote_receiver> end;
  template <class End, class... Args>
  explicit link_end(std::in_place_type_t<End> t, Args&&... args) : end(t, std::forward<Args>(args)...) {}
  void wait(std::chrono::nanoseconds timeout) {
    std::visit([&](auto& e) { e.wait(timeout); }, end);
  }
  remote_stats stats() const {
    return std::visit([](const auto& e) { return e.stats(); }, end);
  }
};

distributed_pipeline::distributed_pipeline(world& w, pipeline& p, distributed_options options)
    : world_(w), pipeline_(p), options_(options) {
  p.set_ranks(w.rank(), w.size());
}

distributed_pipeline::~distributed_pipeline() = default;

void distributed_pipeline::start() {
  if (!ends_.empty()) throw error(errc::invalid_pipeline, "pipeline '" + pipeline_.name() + "' was already started");
  const auto planned = pipeline_.cross_rank_links(); // refuses a bad placement before anything starts
  if (!planned.empty() && options_.first_link + static_cast<int>(planned.back().index) >= 16384)
    throw error(errc::invalid_argument, "pipeline '" + pipeline_.name() + "': remote link numbers from " +
                                            std::to_string(options_.first_link) + " for " +
                                            std::to_string(planned.back().index + 1) +
                                            " connections pass 16,383 (distributed_options::first_link)");
  std::exception_ptr failed;
  try {
    pipeline_.start();
  } catch (...) {
    failed = std::current_exception();
  }
  // Every rank says whether its part started before any link opens: a rank whose kernels did not
  // build would otherwise be known to the others only by its links' silence, after the timeout.
  int down = -1;
  try {
    down = started_everywhere(failed != nullptr);
  } catch (...) { // not every rank reached the exchange: this rank's own error says more
    if (failed) std::rethrow_exception(failed);
    (void)pipeline_.stop();
    throw;
  }
  if (failed) std::rethrow_exception(failed);
  if (down >= 0) {
    (void)pipeline_.stop();
    throw error(errc::remote_failed, "pipeline '" + pipeline_.name() + "' did not start on rank " +
                                         std::to_string(down) + " (its error is reported there); rank " +
                                         std::to_string(world_.rank()) + " stopped its part");
  }
  links_ = pipeline_.cross_rank_links();
  for (const auto& l : links_) {
    const int number = options_.first_link + static_cast<int>(l.index);
    if (l.sending)
      ends_.push_back(std::make_unique<link_end>(std::in_place_type<remote_sender>, world_, l.ring, l.to_rank, number,
                                                 options_.link));
    else
      ends_.push_back(std::make_unique<link_end>(std::in_place_type<remote_receiver>, world_, l.ring, l.from_rank,
                                                 number, options_.link));
  }
}

// One all-reduce (MAX) of rank + 1 for a rank that failed to start, 0 for one that started, on a
// communicator of the call's own: the failed rank (the highest, if several), or -1.
int distributed_pipeline::started_everywhere(bool failed_here) {
  const auto deadline = std::chrono::steady_clock::now() + options_.link.timeout;
  const auto late = [&] {
    return error(errc::timeout, "pipeline '" + pipeline_.name() + "' on rank " + std::to_string(world_.rank()) +
                                    ": not every rank started its part within " +
                                    std::to_string(options_.link.timeout.count() / 1000000) + " ms");
  };
  auto comm = detail::own_communicator(world_, deadline);
  if (!comm) throw late();
  auto values = std::make_unique<std::array<int, 2>>(std::array<int, 2>{failed_here ? world_.rank() + 1 : 0, 0});
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(world_.lock());
    MPI_Iallreduce(&(*values)[0], &(*values)[1], 1, MPI_INT, MPI_MAX, *comm, &r);
  }
  if (!detail::complete_by(world_, r, deadline)) {
    (void)values.release(); // NOLINT: MPI writes them once the other ranks join
    throw late();
  }
  std::lock_guard lock(world_.lock());
  MPI_Comm_free(&*comm);
  return (*values)[1] - 1;
}

void distributed_pipeline::wait(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // The pipeline first: a link that fails cancels its port, which fails the pipeline with the
  // link's reason; a pipeline that fails cancels its ports, which ends their links.
  pipeline_.wait(timeout);
  for (auto& e : ends_)
    e->wait(std::max(std::chrono::nanoseconds(0), deadline - std::chrono::steady_clock::now()));
}

std::vector<remote_stats> distributed_pipeline::link_stats() const {
  std::vector<remote_stats> s(links_.size());
  for (std::size_t i = 0; i < ends_.size(); ++i)
    s[i] = ends_[i]->stats();
  return s;
}

std::string distributed_pipeline::plan() const {
  std::string text = world_.describe() + "\n" + pipeline_.plan();
  for (const auto& l : links_)
    text += "remote link " + std::to_string(options_.first_link + static_cast<int>(l.index)) + ": " + l.from +
            " (rank " + std::to_string(l.from_rank) + ") -> " + l.to + " (rank " + std::to_string(l.to_rank) +
            "), through port '" + l.port + "'\n";
  return text;
}

} // namespace ringpipe::mpi
