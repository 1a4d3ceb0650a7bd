#pragma once
// Collectives over the device arrays of every rank of an MPI program: each rank passes its own
// arrays (collective.hpp), every rank calls in the same order. all_reduce reduces this rank's
// arrays on its devices to the host, exchanges the ranks' partial results (a nonblocking
// all-gather on a communicator of the call's own), combines them in rank order on the host, so
// that every rank gets the same bits, and writes the result into each of its arrays.
//
//   std::vector<device_array<float>> grads = ...;                 // this rank's devices
//   mpi::all_reduce(w, grads, reduction<float>::sum());           // every array on every rank: the sum

#include <ringpipe/collective.hpp>
#include <ringpipe/mpi/world.hpp>

#include <vector>

namespace ringpipe::mpi {

namespace detail {
/// Combines `partial` (this rank's, `element`-byte elements) with every rank's, in rank order,
/// in place. Throws errc::timeout when not every rank took part within the timeout.
void combine_across_ranks(world& w, std::vector<std::byte>& partial, const ringpipe::detail::element_op& op,
                          const collective_options& o, bool check_only = false);
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

} // namespace ringpipe::mpi
