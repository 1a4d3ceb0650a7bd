#pragma once
// Collectives over device arrays on N devices: reduce (to a device or the host), all-reduce,
// broadcast, gather, scatter, reduce-scatter and all-gather, with sum, min, max, product or an
// operation given as OpenCL C. Each call blocks until every device has its result, or throws the
// first failure or timeout, naming the device; nothing it started is still running then.
//
// Paths (src/coord/), chosen per call:
//   host    arrays in shared memory of CPU devices up to one_shot_bytes (every size by default):
//           host threads combine them in place in one pass; and links through host memory (an
//           array without shared memory) when the operation has a host form: the bytes cross the
//           host anyway, so it combines them there, in chunks, or in place through a map for
//           buffers of CPU devices (collective_host.cpp, host_mappings.cpp)
//   shared  every array in shared memory of one context: one kernel per device reads its part of
//           every input in place and writes it to every output (collective_shared.cpp)
//   devices otherwise: reduce-scatter (device d combines part d of every input, copying in what it
//           cannot read in place) and all-gather, each device receiving 2(N-1)/N of the array
//           (collective_device.cpp)
//
//   std::vector<ringpipe::device_array<float>> parts = ...;       // one per device, same size
//   ringpipe::all_reduce(parts, ringpipe::reduction<float>::sum());

#include <ringpipe/array.hpp>
#include <ringpipe/opencl_type.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ringpipe {

/// The operations collectives know; `custom` is the user's.
enum class reduce_kind { sum, product, min, max, custom };

/// How elements combine: an associative, commutative operation of `a` and `b`.
template <class T> struct reduction {
  std::string name;               ///< how errors and reports name it
  std::string opencl_c;           ///< an OpenCL C expression of `a` and `b` (type T)
  std::function<T(T, T)> on_host; ///< the same on the host; empty: combined on devices only
  reduce_kind kind = reduce_kind::custom;

  static reduction sum() {
    return {"sum", "a + b", [](T a, T b) { return static_cast<T>(a + b); }, reduce_kind::sum};
  }
  static reduction product() {
    return {"product", "a * b", [](T a, T b) { return static_cast<T>(a * b); }, reduce_kind::product};
  }
  static reduction min() {
    return {"min", "min(a, b)", [](T a, T b) { return b < a ? b : a; }, reduce_kind::min};
  }
  static reduction max() {
    return {"max", "max(a, b)", [](T a, T b) { return a < b ? b : a; }, reduce_kind::max};
  }
  /// A user operation: `opencl_c` is an expression of `a` and `b`, e.g. "a ^ b" or
  /// "fmax(fabs(a), fabs(b))"; `on_host` (optional) lets collectives combine on the host where the
  /// bytes pass through it anyway (shared memory of CPU devices, staged links).
  static reduction custom(std::string name, std::string opencl_c, std::function<T(T, T)> on_host = {}) {
    return {std::move(name), std::move(opencl_c), std::move(on_host), reduce_kind::custom};
  }
};

struct collective_options {
  std::string name = "collective";          ///< how errors name the call
  std::chrono::milliseconds timeout{30000}; ///< for the whole call; the message names who was late
  /// Arrays in shared memory of CPU devices up to this size are combined by host threads (the
  /// calling thread, and one per idle core of the devices' pool from 8 MiB on), larger ones by a
  /// kernel per device. Every size by default: on PoCL the host's vectorised loop ran 1.1-5x faster
  /// than the kernels at every size measured (docs/performance.md).
  std::size_t one_shot_bytes = std::numeric_limits<std::size_t>::max();
  /// Buffers of CPU devices (rusticl's llvmpipe) are combined on the host through a map, which
  /// there hands out the buffer's own memory: no copy in or out. false: copied in chunks, as the
  /// buffers of other devices are.
  bool map_cpu_buffers = true;
  /// Called on the calling thread before each device's part of each step ("reduce-scatter",
  /// "all-gather", ...): a throw fails the collective as that device's failure (tests inject
  /// failures this way; a tracer can log steps).
  std::function<void(const device&, std::string_view step)> before_step = nullptr;
};

namespace detail {
/// A reduction without its element type.
struct element_op {
  std::string name;
  std::size_t element = 0;
  std::string cl_type;
  std::string cl_expression;
  /// acc[i] = op(acc[i], x[i]) for i < count; empty when the operation has no host form.
  std::function<void(void* acc, const void* x, std::size_t count)> on_host;
};

/// acc[i] = op(acc[i], x[i]) for i < count.
using host_combine = void (*)(void* acc, const void* x, std::size_t count);
/// The host form of a built-in operation on T, compiled in the library so that its loop is
/// vectorised whatever the caller's flags (src/coord/host_combine.cpp); null for `custom`.
template <class T> host_combine builtin_host_combine(reduce_kind kind);
extern template host_combine builtin_host_combine<std::int32_t>(reduce_kind);
extern template host_combine builtin_host_combine<std::uint32_t>(reduce_kind);
extern template host_combine builtin_host_combine<std::int64_t>(reduce_kind);
extern template host_combine builtin_host_combine<std::uint64_t>(reduce_kind);
extern template host_combine builtin_host_combine<float>(reduce_kind);
extern template host_combine builtin_host_combine<double>(reduce_kind);

/// acc[i] = f(acc[i], x[i]) with the user's host operation.
template <class T, class F> auto host_loop(F f) {
  return [f](void* acc, const void* x, std::size_t count) {
    auto* a = static_cast<T*>(acc);
    const auto* b = static_cast<const T*>(x);
    for (std::size_t i = 0; i < count; ++i)
      a[i] = f(a[i], b[i]);
  };
}

template <class T> element_op erase(const reduction<T>& r) {
  element_op e{r.name, sizeof(T), std::string(opencl_type_name<T>()), r.opencl_c, nullptr};
  if (r.kind != reduce_kind::custom)
    e.on_host = builtin_host_combine<T>(r.kind);
  else if (r.on_host)
    e.on_host = host_loop<T>(r.on_host);
  return e;
}

template <class T> std::vector<array_bytes> erase(const std::vector<device_array<T>>& arrays) {
  return {arrays.begin(), arrays.end()};
}

using arrays = std::vector<array_bytes>;
void all_reduce_bytes(const arrays& in, const arrays& out, const element_op& op, const collective_options& o);
void reduce_scatter_bytes(const arrays& in, const arrays& out, const element_op& op, const collective_options& o);
void all_gather_bytes(const arrays& in, const arrays& out, const collective_options& o);
void reduce_bytes(const arrays& in, const array_bytes& root, const element_op& op, const collective_options& o);
void reduce_to_host_bytes(const arrays& in, void* host, std::size_t bytes, const element_op& op,
                          const collective_options& o);
void broadcast_bytes(const array_bytes& from, const arrays& to, const collective_options& o);
void gather_bytes(const arrays& in, const array_bytes& to, const collective_options& o);
void gather_to_host_bytes(const arrays& in, void* host, std::size_t bytes, const collective_options& o);
void scatter_bytes(const array_bytes& from, const arrays& to, const collective_options& o);
} // namespace detail

/// out[d] = in[0] op in[1] op ... for every device d (in and out: one array per device, all the
/// same size; out may be in: in place).
template <class T>
void all_reduce(const std::vector<device_array<T>>& in, const std::vector<device_array<T>>& out, const reduction<T>& op,
                const collective_options& o = {}) {
  detail::all_reduce_bytes(detail::erase(in), detail::erase(out), detail::erase(op), o);
}
template <class T>
void all_reduce(const std::vector<device_array<T>>& arrays, const reduction<T>& op, const collective_options& o = {}) {
  all_reduce(arrays, arrays, op, o);
}
/// root = in[0] op in[1] op ... (root on any device, the size of each input).
template <class T>
void reduce(const std::vector<device_array<T>>& in, const device_array<T>& root, const reduction<T>& op,
            const collective_options& o = {}) {
  detail::reduce_bytes(detail::erase(in), root, detail::erase(op), o);
}
/// The same, into host memory.
template <class T>
void reduce(const std::vector<device_array<T>>& in, std::type_identity_t<std::span<T>> host, const reduction<T>& op,
            const collective_options& o = {}) {
  detail::reduce_to_host_bytes(detail::erase(in), host.data(), host.size_bytes(), detail::erase(op), o);
}
/// Every array of `to` gets a copy of `from`.
template <class T>
void broadcast(const device_array<T>& from, const std::vector<device_array<T>>& to, const collective_options& o = {}) {
  detail::broadcast_bytes(from, detail::erase(to), o);
}
/// to = in[0], in[1], ... back to back (to holds N times an input).
template <class T>
void gather(const std::vector<device_array<T>>& in, const device_array<T>& to, const collective_options& o = {}) {
  detail::gather_bytes(detail::erase(in), to, o);
}
template <class T>
void gather(const std::vector<device_array<T>>& in, std::type_identity_t<std::span<T>> host,
            const collective_options& o = {}) {
  detail::gather_to_host_bytes(detail::erase(in), host.data(), host.size_bytes(), o);
}
/// to[d] = the d-th of N equal parts of `from`.
template <class T>
void scatter(const device_array<T>& from, const std::vector<device_array<T>>& to, const collective_options& o = {}) {
  detail::scatter_bytes(from, detail::erase(to), o);
}
/// out[d] = part d of (in[0] op in[1] op ...): each input holds N parts the size of an output.
template <class T>
void reduce_scatter(const std::vector<device_array<T>>& in, const std::vector<device_array<T>>& out,
                    const reduction<T>& op, const collective_options& o = {}) {
  detail::reduce_scatter_bytes(detail::erase(in), detail::erase(out), detail::erase(op), o);
}
/// out[d] = in[0], in[1], ... back to back, on every device.
template <class T>
void all_gather(const std::vector<device_array<T>>& in, const std::vector<device_array<T>>& out,
                const collective_options& o = {}) {
  detail::all_gather_bytes(detail::erase(in), detail::erase(out), o);
}

} // namespace ringpipe
