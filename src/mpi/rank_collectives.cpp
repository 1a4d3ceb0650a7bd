// Collectives over ranks: the ranks' partial results exchanged and combined on the host.

#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/rank_collectives.hpp>

#include <mpi.h>

#include <cstring>
#include <limits>
#include <memory>

namespace ringpipe::mpi::detail {

void combine_across_ranks(world& w, std::vector<std::byte>& partial, const ringpipe::detail::element_op& op,
                          const collective_options& o, bool check_only) {
  const std::string what =
      o.name + " (" + op.name + ") on rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size());
  if (!op.on_host)
    throw error(errc::invalid_argument, what + ": the operation has no host form, which combining across ranks "
                                               "needs (reduction<T>::custom(name, expression, on_host))");
  if (partial.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw error(errc::invalid_argument,
                what + ": " + std::to_string(partial.size()) + " bytes per rank, over MPI's int count");
  if (check_only) return;
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  const auto late = [&](const char* step) {
    // The request cannot be cancelled (MPI forbids it for collectives): it completes once the
    // others join, into memory kept for it.
    return error(errc::timeout, what + ": not every rank took part in the " + step + " within " +
                                    std::to_string(o.timeout.count()) + " ms");
  };
  auto comm = own_communicator(w, deadline);
  if (!comm) throw late("communicator set-up");
  // This rank's partial, then every rank's, in one buffer that outlives a call the others never
  // join (MPI reads and writes it once they do).
  const int bytes = static_cast<int>(partial.size());
  auto exchanged = std::make_unique<std::vector<std::byte>>(partial.size() * static_cast<std::size_t>(w.size() + 1));
  std::memcpy(exchanged->data(), partial.data(), partial.size());
  std::byte* const all = exchanged->data() + partial.size();
  MPI_Request r = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(w.lock());
    MPI_Iallgather(exchanged->data(), bytes, MPI_BYTE, all, bytes, MPI_BYTE, *comm, &r);
  }
  if (!complete_by(w, r, deadline)) {
    (void)exchanged.release(); // NOLINT: left to MPI
    throw late("exchange");
  }
  {
    std::lock_guard lock(w.lock());
    MPI_Comm_free(&*comm);
  }
  // Rank 0's, then each next rank's: the same order, the same bits, on every rank.
  std::memcpy(partial.data(), all, partial.size());
  for (int k = 1; k < w.size(); ++k)
    op.on_host(partial.data(), all + static_cast<std::size_t>(k) * partial.size(), partial.size() / op.element);
}

} // namespace ringpipe::mpi::detail
