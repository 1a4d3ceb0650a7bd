// Collectives over ranks: the ranks' arrays exchanged through the host, on a communicator of each
// call's own, after every rank has checked every rank's sizes.

#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/rank_collectives.hpp>

#include <mpi.h>

#include <cstring>
#include <functional>
#include <limits>
#include <memory>

namespace ringpipe::mpi::detail {

namespace {

// One call over ranks: its communicator, its deadline, and how its errors name it. A request the
// others never join cannot be cancelled (MPI forbids it for collectives): it completes once they
// do, into memory left to it.
class rank_call {
public:
  rank_call(world& w, const collective_options& o, std::string what)
      : w_(w), o_(o),
        what_(std::move(what) + " on rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size())),
        deadline_(std::chrono::steady_clock::now() + o.timeout) {}
  ~rank_call() {
    if (!comm_) return;
    std::lock_guard lock(w_.lock());
    MPI_Comm_free(&*comm_);
  }
  rank_call(const rank_call&) = delete;
  rank_call& operator=(const rank_call&) = delete;

  const std::string& what() const { return what_; }
  int ranks() const { return w_.size(); }
  [[noreturn]] void refuse(const std::string& why) const { throw error(errc::invalid_argument, what_ + ": " + why); }

  /// Every rank's `values` (the same number on every rank), rank by rank.
  std::vector<std::uint64_t> share(const std::vector<std::uint64_t>& values) {
    auto buffers = std::make_unique<std::vector<std::uint64_t>>(values);
    buffers->resize(values.size() * static_cast<std::size_t>(w_.size() + 1));
    const int n = static_cast<int>(values.size());
    run("size check", buffers, [&](MPI_Comm c, MPI_Request* r) {
      MPI_Iallgather(buffers->data(), n, MPI_UINT64_T, buffers->data() + n, n, MPI_UINT64_T, c, r);
    });
    return {buffers->begin() + n, buffers->end()};
  }

  /// Starts a nonblocking call on the call's communicator and waits for it; `keep` (what MPI reads
  /// and writes) is left to MPI if the others do not join in time.
  template <class Keep, class Start> void run(const char* step, std::unique_ptr<Keep>& keep, Start start) {
    if (!comm_) {
      comm_ = own_communicator(w_, deadline_);
      if (!comm_) throw late("communicator set-up");
    }
    MPI_Request r = MPI_REQUEST_NULL;
    {
      std::lock_guard lock(w_.lock());
      start(*comm_, &r);
    }
    if (!complete_by(w_, r, deadline_)) {
      (void)keep.release(); // NOLINT: left to MPI
      comm_.reset();        // and its communicator
      throw late(step);
    }
  }

private:
  error late(const char* step) const {
    return error(errc::timeout, what_ + ": not every rank took part in the " + step + " within " +
                                    std::to_string(o_.timeout.count()) + " ms");
  }
  world& w_;
  const collective_options& o_;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<MPI_Comm> comm_;
};

void check_int(const rank_call& call, std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    call.refuse(std::to_string(bytes) + " bytes, over MPI's int count");
}

std::string size_text(std::uint64_t bytes) {
  if (bytes == sizes_differ) return "arrays of different sizes";
  if (bytes == no_arrays) return "no array";
  return std::to_string(bytes) + " bytes";
}

// Refuses, alike on every rank, inputs of different sizes and results that do not fit: `shared`
// holds every rank's input bytes and result room, pairs in rank order; ranks for which `gets(r)`
// need room for `result` bytes.
template <class Gets>
void check_reduce_sizes(const rank_call& call, const std::vector<std::uint64_t>& shared, std::uint64_t result,
                        Gets gets) {
  const auto ranks = shared.size() / 2;
  std::string wrong;
  for (std::size_t r = 0; r < ranks; ++r)
    if (shared[2 * r] != shared[0] || shared[2 * r] >= no_arrays)
      wrong += (wrong.empty() ? "" : ", ") + ("rank " + std::to_string(r) + ": " + size_text(shared[2 * r]));
  if (!wrong.empty())
    call.refuse("every rank's arrays must have one size, rank 0's (" + size_text(shared[0]) + "); " + wrong);
  for (std::size_t r = 0; r < ranks; ++r)
    if (gets(r) && shared[2 * r + 1] != result)
      wrong += (wrong.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " has " + size_text(shared[2 * r + 1]));
  if (!wrong.empty()) call.refuse("the result is " + std::to_string(result) + " bytes; " + wrong);
}

// Combines `blocks` (one per rank, rank 0's first, `bytes` each) in rank order into `into`.
void combine_in_rank_order(const std::byte* blocks, std::size_t ranks, std::size_t bytes,
                           const ringpipe::detail::element_op& op, std::byte* into) {
  std::memcpy(into, blocks, bytes);
  for (std::size_t k = 1; k < ranks; ++k)
    op.on_host(into, blocks + k * bytes, bytes / op.element);
}

} // namespace

void combine_across_ranks(world& w, std::vector<std::byte>& partial, const ringpipe::detail::element_op& op,
                          const collective_options& o, bool check_only) {
  rank_call call(w, o, o.name + " (" + op.name + ")");
  if (!op.on_host)
    call.refuse("the operation has no host form, which combining across ranks needs (reduction<T>::custom(name, "
                "expression, on_host))");
  check_int(call, partial.size());
  if (check_only) return;
  // This rank's partial, then every rank's, in one buffer that outlives a call the others never join.
  const int bytes = static_cast<int>(partial.size());
  auto exchanged = std::make_unique<std::vector<std::byte>>(partial.size() * static_cast<std::size_t>(w.size() + 1));
  std::memcpy(exchanged->data(), partial.data(), partial.size());
  std::byte* const all = exchanged->data() + partial.size();
  call.run("exchange", exchanged, [&](MPI_Comm c, MPI_Request* r) {
    MPI_Iallgather(exchanged->data(), bytes, MPI_BYTE, all, bytes, MPI_BYTE, c, r);
  });
  // Rank 0's, then each next rank's: the same order, the same bits, on every rank.
  combine_in_rank_order(all, static_cast<std::size_t>(w.size()), partial.size(), op, partial.data());
}

void broadcast_across_ranks(world& w, int root, std::size_t size, std::vector<std::byte>& bytes,
                            const collective_options& o) {
  rank_call call(w, o, o.name + " (broadcast from rank " + std::to_string(root) + ")");
  if (root < 0 || root >= w.size()) call.refuse("no rank " + std::to_string(root));
  const auto sizes = call.share({size});
  const auto wanted = sizes[static_cast<std::size_t>(root)];
  std::string differ;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    if (sizes[r] != wanted || sizes[r] >= no_arrays)
      differ += (differ.empty() ? "" : ", ") + ("rank " + std::to_string(r) + ": " + size_text(sizes[r]));
  if (!differ.empty())
    call.refuse("every rank's arrays must have one size, rank " + std::to_string(root) + "'s (" + size_text(wanted) +
                "); " + differ);
  check_int(call, size);
  auto data = std::make_unique<std::vector<std::byte>>(std::move(bytes));
  data->resize(size);
  call.run("broadcast", data,
           [&](MPI_Comm c, MPI_Request* r) { MPI_Ibcast(data->data(), static_cast<int>(size), MPI_BYTE, root, c, r); });
  bytes = std::move(*data);
}

void gather_across_ranks(world& w, int root, std::span<const std::byte> mine, std::size_t room,
                         std::vector<std::byte>& all, const collective_options& o) {
  rank_call call(w, o,
                 o.name + (root < 0 ? std::string(" (all-gather)") : " (gather to rank " + std::to_string(root) + ")"));
  if (root >= w.size()) call.refuse("no rank " + std::to_string(root));
  const auto shared = call.share({mine.size(), room});
  const auto ranks = static_cast<std::size_t>(call.ranks());
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r)
    total += shared[2 * r];
  check_int(call, total);
  std::string short_of;
  for (std::size_t r = 0; r < ranks; ++r)
    if ((root < 0 || r == static_cast<std::size_t>(root)) && shared[2 * r + 1] != total &&
        shared[2 * r + 1] != any_size)
      short_of +=
          (short_of.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " has " + size_text(shared[2 * r + 1]));
  if (!short_of.empty()) call.refuse("the result is " + std::to_string(total) + " bytes; " + short_of);
  // What MPI reads and writes until the call completes: this rank's bytes, then everyone's, and
  // where each rank's go.
  struct buffers {
    std::vector<std::byte> data;
    std::vector<int> counts, offsets;
  };
  auto b = std::make_unique<buffers>();
  b->data.assign(mine.begin(), mine.end());
  b->data.resize(mine.size() + total);
  for (std::size_t r = 0, at = 0; r < ranks; at += shared[2 * r], ++r) {
    b->counts.push_back(static_cast<int>(shared[2 * r]));
    b->offsets.push_back(static_cast<int>(at));
  }
  std::byte* const into = b->data.data() + mine.size();
  const int n = static_cast<int>(mine.size());
  call.run(root < 0 ? "all-gather" : "gather", b, [&](MPI_Comm c, MPI_Request* r) {
    if (root < 0)
      MPI_Iallgatherv(b->data.data(), n, MPI_BYTE, into, b->counts.data(), b->offsets.data(), MPI_BYTE, c, r);
    else
      MPI_Igatherv(b->data.data(), n, MPI_BYTE, into, b->counts.data(), b->offsets.data(), MPI_BYTE, root, c, r);
  });
  all.assign(into, into + (root < 0 || w.rank() == root ? total : 0));
}

void reduce_to_rank(world& w, int root, std::size_t bytes, std::size_t room, const ringpipe::detail::element_op& op,
                    const collective_options& o, const std::function<std::vector<std::byte>()>& reduce_here,
                    std::vector<std::byte>& result) {
  rank_call call(w, o, o.name + " (" + op.name + ", reduce to rank " + std::to_string(root) + ")");
  if (root < 0 || root >= w.size()) call.refuse("no rank " + std::to_string(root));
  if (!op.on_host) call.refuse("the operation has no host form, which combining across ranks needs");
  const auto shared = call.share({bytes, w.rank() == root ? room : 0});
  check_reduce_sizes(call, shared, shared[0], [&](std::size_t r) { return r == static_cast<std::size_t>(root); });
  check_int(call, bytes * static_cast<std::size_t>(w.size()));
  const auto ranks = static_cast<std::size_t>(w.size());
  auto blocks = std::make_unique<std::vector<std::byte>>(reduce_here());
  blocks->resize(bytes * (ranks + 1)); // this rank's partial, then every rank's on the root
  const int n = static_cast<int>(bytes);
  call.run("gather", blocks, [&](MPI_Comm c, MPI_Request* r) {
    MPI_Igather(blocks->data(), n, MPI_BYTE, blocks->data() + bytes, n, MPI_BYTE, root, c, r);
  });
  if (w.rank() != root) return result.clear();
  result.resize(bytes);
  combine_in_rank_order(blocks->data() + bytes, ranks, bytes, op, result.data());
}

void reduce_scatter_over_ranks(world& w, std::size_t bytes, std::size_t room, const ringpipe::detail::element_op& op,
                               const collective_options& o, const std::function<std::vector<std::byte>()>& reduce_here,
                               std::vector<std::byte>& result) {
  rank_call call(w, o, o.name + " (" + op.name + ", reduce-scatter)");
  if (!op.on_host) call.refuse("the operation has no host form, which combining across ranks needs");
  const auto ranks = static_cast<std::size_t>(w.size());
  const auto shared = call.share({bytes, room});
  if (shared[0] < no_arrays && shared[0] % (ranks * op.element) != 0)
    call.refuse(std::to_string(shared[0] / op.element) + " elements do not split into " + std::to_string(ranks) +
                " equal parts, one per rank");
  check_reduce_sizes(call, shared, shared[0] / ranks, [](std::size_t) { return true; });
  check_int(call, bytes);
  const std::size_t part = bytes / ranks;
  // This rank's partial (part r goes to rank r), then part `rank` of every rank's.
  auto blocks = std::make_unique<std::vector<std::byte>>(reduce_here());
  blocks->resize(2 * bytes);
  const int n = static_cast<int>(part);
  call.run("exchange", blocks, [&](MPI_Comm c, MPI_Request* r) {
    MPI_Ialltoall(blocks->data(), n, MPI_BYTE, blocks->data() + bytes, n, MPI_BYTE, c, r);
  });
  result.resize(part);
  combine_in_rank_order(blocks->data() + bytes, ranks, part, op, result.data());
}

} // namespace ringpipe::mpi::detail
