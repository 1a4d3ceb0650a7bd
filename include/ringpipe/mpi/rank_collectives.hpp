#pragma once
// Collectives over the device arrays of every rank of an MPI program: each rank passes its own
// arrays (collective.hpp), every rank calls in the same order, each call on a communicator of its
// own with nonblocking MPI calls (no rank blocks holding the world's lock). all_reduce reduces
// this rank's arrays on its devices to the host, exchanges the ranks' partial results, combines
// them in rank order on the host, so that every rank gets the same bits, and writes the result
// into each of its arrays. broadcast, gather and all_gather move whole arrays through the host.
// Sizes are checked on every rank before anything moves: a mismatch is refused alike everywhere,
// naming the sizes, instead of one rank refusing and the others waiting for it. reduce (to one
// rank) and reduce_scatter combine in rank order too, so every form gives all_reduce's bits.
//
//   std::vector<device_array<float>> grads = ...;                 // this rank's devices
//   mpi::all_reduce(w, grads, reduction<float>::sum());           // every array on every rank: the sum
//   mpi::broadcast(w, 0, weights);                                // rank 0's first array everywhere

#include <ringpipe/collective.hpp>
#include <ringpipe/mpi/world.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

namespace ringpipe::mpi {

namespace detail {
/// Combines `partial` (this rank's, `element`-byte elements) with every rank's, in rank order,
/// in place. Throws errc::timeout when not every rank took part within the timeout.
void combine_across_ranks(world& w, std::vector<std::byte>& partial, const ringpipe::detail::element_op& op,
                          const collective_options& o, bool check_only = false);
inline constexpr std::size_t sizes_differ = SIZE_MAX, no_arrays = SIZE_MAX - 1;
/// gather_across_ranks' `room` for a result of any size (text, say).
inline constexpr std::size_t any_size = SIZE_MAX - 2;
/// `bytes` from `root` to every rank: `size` is this rank's arrays' (or sizes_differ, no_arrays),
/// checked alike on every rank before anything moves; root passes its data in `bytes`.
void broadcast_across_ranks(world& w, int root, std::size_t size, std::vector<std::byte>& bytes,
                            const collective_options& o);
/// Every rank's `mine` back to back in rank order, into `all` on every rank (root < 0) or on root
/// only. `room`: the bytes each rank has for the result (root only when root >= 0; sizes_differ,
/// no_arrays), checked against the total on every rank before anything moves.
void gather_across_ranks(world& w, int root, std::span<const std::byte> mine, std::size_t room,
                         std::vector<std::byte>& all, const collective_options& o);
/// Every rank's partial (`reduce_here()`, `bytes` on every rank) combined in rank order into
/// `result` on `root` (`room`: the bytes root has for it), as all_reduce combines them.
void reduce_to_rank(world& w, int root, std::size_t bytes, std::size_t room, const ringpipe::detail::element_op& op,
                    const collective_options& o, const std::function<std::vector<std::byte>()>& reduce_here,
                    std::vector<std::byte>& result);
/// Part r of every rank's partial (`bytes` on every rank, in as many equal parts as ranks)
/// combined in rank order into `result` on rank r (`room`: the bytes each rank has for it).
void reduce_scatter_over_ranks(world& w, std::size_t bytes, std::size_t room, const ringpipe::detail::element_op& op,
                               const collective_options& o, const std::function<std::vector<std::byte>()>& reduce_here,
                               std::vector<std::byte>& result);
/// This rank's arrays combined on the host (empty: no arrays).
template <class T>
std::function<std::vector<std::byte>()> reduce_here(const std::vector<device_array<T>>& arrays, const reduction<T>& op,
                                                    const collective_options& o) {
  return [&arrays, &op, &o] {
    std::vector<std::byte> partial(arrays.front().size() * sizeof(T));
    reduce(arrays, std::span<T>(reinterpret_cast<T*>(partial.data()), arrays.front().size()), op, o);
    return partial;
  };
}
/// The arrays' contents back to back, through the host.
template <class T>
std::vector<std::byte> read_all(const std::vector<device_array<T>>& arrays, const collective_options& o) {
  std::size_t bytes = 0;
  for (const auto& a : arrays)
    bytes += a.size() * sizeof(T);
  std::vector<std::byte> host(bytes);
  std::size_t at = 0;
  for (const auto& a : arrays) {
    a.read(std::span<T>(reinterpret_cast<T*>(host.data() + at), a.size()), o.timeout);
    at += a.size() * sizeof(T);
  }
  return host;
}
/// The size in bytes of every array, sizes_differ where they differ (none: 0).
template <class T> std::size_t common_bytes(const std::vector<device_array<T>>& arrays) {
  std::size_t bytes = arrays.empty() ? 0 : arrays.front().size() * sizeof(T);
  for (const auto& a : arrays)
    if (a.size() * sizeof(T) != bytes) return sizes_differ;
  return bytes;
}
template <class T>
void write_all(const std::vector<device_array<T>>& arrays, std::span<const std::byte> host,
               const collective_options& o) {
  for (const auto& a : arrays)
    a.write(std::span<const T>(reinterpret_cast<const T*>(host.data()), host.size() / sizeof(T)), o.timeout);
}
} // namespace detail

/// Every array of every rank gets the combination of every rank's arrays (all the same size).
/// The operation needs a host form (`reduction<T>::on_host` for a custom one).
template <class T>
void all_reduce(world& w, const std::vector<device_array<T>>& arrays, const reduction<T>& op,
                const collective_options& o = {}) {
  if (arrays.empty()) throw error(errc::invalid_argument, o.name + ": no array on rank " + std::to_string(w.rank()));
  const auto erased = ringpipe::detail::erase(op);
  std::vector<std::byte> partial(arrays.front().size() * sizeof(T));
  detail::combine_across_ranks(w, partial, erased, o, true); // refuses what it cannot do, before any work
  const std::span<T> host(reinterpret_cast<T*>(partial.data()), arrays.front().size());
  reduce(arrays, host, op, o);
  detail::combine_across_ranks(w, partial, erased, o);
  for (const auto& a : arrays)
    a.write(std::span<const T>(host), o.timeout);
}

/// `host` on `root` = the combination of every rank's arrays (all the same size), the same bits
/// all_reduce gives; the other ranks pass an empty span. The operation needs a host form.
template <class T>
void reduce(world& w, int root, const std::vector<device_array<T>>& arrays, std::type_identity_t<std::span<T>> host,
            const reduction<T>& op, const collective_options& o = {}) {
  std::vector<std::byte> result;
  detail::reduce_to_rank(w, root, arrays.empty() ? detail::no_arrays : detail::common_bytes(arrays), host.size_bytes(),
                         ringpipe::detail::erase(op), o, detail::reduce_here(arrays, op, o), result);
  if (!result.empty()) std::memcpy(host.data(), result.data(), result.size());
}

/// Every `out` array on rank r = part r of the combination of every rank's `in` arrays: each
/// input (all the same size on every rank) holds as many equal parts as there are ranks, each the
/// size of an output. The same bits all_reduce gives for that part.
template <class T>
void reduce_scatter(world& w, const std::vector<device_array<T>>& in, const std::vector<device_array<T>>& out,
                    const reduction<T>& op, const collective_options& o = {}) {
  std::vector<std::byte> result;
  detail::reduce_scatter_over_ranks(w, in.empty() ? detail::no_arrays : detail::common_bytes(in),
                                    out.empty() ? detail::no_arrays : detail::common_bytes(out),
                                    ringpipe::detail::erase(op), o, detail::reduce_here(in, op, o), result);
  detail::write_all(out, result, o);
}

/// Every array on every rank gets a copy of `root`'s first array (every array the same size).
template <class T>
void broadcast(world& w, int root, const std::vector<device_array<T>>& arrays, const collective_options& o = {}) {
  const std::size_t size = detail::common_bytes(arrays);
  const bool from_here = w.rank() == root && size != detail::sizes_differ && !arrays.empty();
  std::vector<std::byte> bytes(from_here ? size : 0);
  if (from_here)
    arrays.front().read(std::span<T>(reinterpret_cast<T*>(bytes.data()), arrays.front().size()), o.timeout);
  detail::broadcast_across_ranks(w, root, arrays.empty() ? detail::no_arrays : size, bytes, o);
  if (!from_here) return detail::write_all(arrays, bytes, o);
  if (arrays.size() > 1)
    ringpipe::broadcast(arrays.front(), std::vector<device_array<T>>(arrays.begin() + 1, arrays.end()), o);
}

/// `host` on `root` = every rank's `in` arrays back to back, rank by rank (each rank's in its
/// order; ranks may pass different numbers and sizes). Other ranks pass an empty span.
template <class T>
void gather(world& w, int root, const std::vector<device_array<T>>& in, std::type_identity_t<std::span<T>> host,
            const collective_options& o = {}) {
  const auto mine = detail::read_all(in, o);
  std::vector<std::byte> all;
  detail::gather_across_ranks(w, root, mine, w.rank() == root ? host.size_bytes() : 0, all, o);
  if (w.rank() == root) std::memcpy(host.data(), all.data(), all.size());
}

/// Every `out` array on every rank = every rank's `in` arrays back to back, rank by rank.
template <class T>
void all_gather(world& w, const std::vector<device_array<T>>& in, const std::vector<device_array<T>>& out,
                const collective_options& o = {}) {
  const auto mine = detail::read_all(in, o);
  std::vector<std::byte> all;
  detail::gather_across_ranks(w, -1, mine, out.empty() ? detail::no_arrays : detail::common_bytes(out), all, o);
  detail::write_all(out, all, o);
}

} // namespace ringpipe::mpi
