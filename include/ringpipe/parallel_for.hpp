#pragma once
// One OpenCL C kernel over an index range, spread over devices. The kernel is an ordinary one:
// work-item get_global_id(0) handles index i of [0, n); each device runs chunks of the range (a
// launch with a global offset), and parallel_for moves the data: `input` arrays hold at least the
// chunk's own elements at their global indices on the device that runs it, `whole_input` arrays
// every element on every device, and the elements of `output` arrays the kernel wrote come back
// to the host, in order. Plain values are passed as they are; `per_device` gives each device its
// own. Chunks are sized by partitioner (partition.hpp): dynamic by default, from each device's
// measured speed. A device that fails mid-run hands its chunks to the others, and the report
// names it; the call throws only when no device is left or the timeout passes.
//
//   const char* saxpy = "__kernel void saxpy(__global const float* x, __global float* y, float a) {"
//                       "  size_t i = get_global_id(0); y[i] = a * x[i] + y[i]; }";
//   auto report = ringpipe::parallel_for(rt, {saxpy, "saxpy"}, n,
//                                        ringpipe::input(x), ringpipe::output(y), 2.0f);

#include <ringpipe/opencl_type.hpp>
#include <ringpipe/partition.hpp>
#include <ringpipe/runtime.hpp>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace ringpipe {

/// An OpenCL C program and the kernel in it that parallel_for runs.
struct kernel_source {
  std::string source;             ///< OpenCL C; `#include` of ringpipe's cl/ files and of include_dirs work
  std::string kernel;             ///< the __kernel function's name
  std::string build_options = {}; ///< added to ringpipe's (e.g. "-DSCALE=2")
  std::string file = {};          ///< what build errors call the source (the user's file name)
};

struct parallel_for_options {
  std::string name = "parallel_for"; ///< how errors and the report name the run
  partitioner partition = dynamic_partition{};
  std::vector<std::size_t> devices = {}; ///< positions in runtime::devices(); empty: every device
  std::chrono::milliseconds timeout{60000};
  /// Whether the CPU devices of the run compete for the host's cores: chunks then go to the
  /// fastest of them rather than to all at once (which only makes them compete). Unset: decided
  /// from their worker threads against runtime::host_cores() (cpu_cores.hpp; the report says
  /// what was found). true or false where the caller knows better (sub-devices, another socket).
  std::optional<bool> cpu_devices_share_cores = std::nullopt;
  /// Called on the calling thread before each chunk is enqueued on a device; a throw fails that
  /// device (its chunks go to the others). For tests and fault injection. Over split arrays the
  /// range is in piece order (see chunk_record).
  std::function<void(const device&, index_range)> before_chunk = nullptr;
};

/// One chunk as it ran.
struct chunk_record {
  std::size_t device = 0; ///< position in parallel_for_report::devices
  /// Its indices; over split arrays, positions in piece order (piece 0's elements, then piece
  /// 1's, ...), which are the indices unless the layout is cyclic.
  index_range range;
  std::size_t issued = 0; ///< order in which chunks were handed out
  double seconds = 0;     ///< from when the device could start it to its end
  bool failed = false;
  bool measuring = false; ///< dynamic: handed out while some device's speed was not yet known
};

struct parallel_device_stats {
  std::string device;          ///< its label
  std::size_t items = 0;       ///< indices it completed
  std::size_t chunks = 0;      ///< chunks it completed
  double busy_seconds = 0;     ///< summed chunk times
  double items_per_second = 0; ///< its recent chunks' items over their seconds
  std::string failure;         ///< why it dropped out, if it did
  std::string pool;            ///< devices of one pool run on the same cores ("host cores" for CPUs)
};

struct parallel_for_report {
  std::string name;
  std::string partition;
  std::size_t items = 0;
  double seconds = 0; ///< wall time of the run (data set-up included)
  std::vector<parallel_device_stats> devices;
  std::vector<chunk_record> chunks; ///< in the order they ended
  /// Whether its CPU devices shared the host's cores, and why (cpu_core_use::describe, or "told").
  std::string cpu_cores;
  /// Share of the items each device completed.
  double share(std::size_t device) const noexcept;
  std::string table() const;
};

/// Weights for a split array (split_array.hpp) laid out by what a run measured: each pool's
/// fastest device that did not fail gets its items per second (relative to the fastest of all,
/// to three digits) and the pool's others 0 (devices on the same cores run one after another, so
/// the pool is fastest when that device does it all). Refused when no device has a speed.
weighted_partition by_measured_speed(const parallel_for_report& report);

/// An array of the kernel's (see the top of this file); build with input(), whole_input(), output().
template <class T> struct input_array { std::span<const T> values; };
template <class T> struct whole_input_array { std::span<const T> values; };
template <class T> struct output_array { std::span<T> values; };
template <class T> struct per_device {
  std::vector<T> values; ///< one per device of the run, in its order
};
/// Runs over split arrays (split_array.hpp): the global index of the running piece's storage
/// position 0, as a long (negative by the halo for the first piece).
struct piece_origin_t {};
inline constexpr piece_origin_t piece_origin{};
/// Runs over split arrays: the running piece's elements per block, and the global indices from
/// one of its blocks to the next, as longs: storage position i holds global index
/// origin + (i / grain) * stride + i % grain (split_layout::grain() and stride() when cyclic; the
/// piece's whole storage as one block when contiguous).
struct piece_grain_t {};
inline constexpr piece_grain_t piece_grain{};
struct piece_stride_t {};
inline constexpr piece_stride_t piece_stride{};
class split_bytes;
template <class T> class split_array;
template <class C> auto input(const C& values) {
  return input_array<typename C::value_type>{std::span<const typename C::value_type>(values)};
}
template <class C> auto whole_input(const C& values) {
  return whole_input_array<typename C::value_type>{std::span<const typename C::value_type>(values)};
}
template <class C> auto output(C& values) {
  return output_array<typename C::value_type>{std::span<typename C::value_type>(values)};
}

namespace detail {
struct parallel_arg {
  enum class kind {
    value,
    per_device,
    chunk_input,
    whole_input,
    output,
    split,
    piece_origin,
    piece_grain,
    piece_stride
  } how = kind::value;
  std::size_t element = 0;            ///< bytes of one element (arrays) or of the value
  std::size_t count = 0;              ///< elements of an array
  const void* from = nullptr;         ///< input arrays
  void* to = nullptr;                 ///< output arrays
  std::vector<std::byte> values;      ///< a value, or one per device
  const split_bytes* split = nullptr; ///< split arrays (alive for the call)
};
template <class T> parallel_arg make_value(const T* values, std::size_t count, parallel_arg::kind how) {
  static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are trivially copyable");
  parallel_arg a{how, sizeof(T), count, nullptr, nullptr, std::vector<std::byte>(sizeof(T) * count)};
  if (count != 0) std::memcpy(a.values.data(), values, sizeof(T) * count);
  return a;
}
template <class T> parallel_arg to_arg(const input_array<T>& a) {
  return {parallel_arg::kind::chunk_input, sizeof(T), a.values.size(), a.values.data(), nullptr, {}};
}
template <class T> parallel_arg to_arg(const whole_input_array<T>& a) {
  return {parallel_arg::kind::whole_input, sizeof(T), a.values.size(), a.values.data(), nullptr, {}};
}
template <class T> parallel_arg to_arg(const output_array<T>& a) {
  return {parallel_arg::kind::output, sizeof(T), a.values.size(), nullptr, a.values.data(), {}};
}
template <class T> parallel_arg to_arg(const split_array<T>& a); // split_array.hpp
inline parallel_arg to_arg(const piece_origin_t&) {
  return {parallel_arg::kind::piece_origin, sizeof(cl_long), 1, nullptr, nullptr, {}};
}
inline parallel_arg to_arg(const piece_grain_t&) {
  return {parallel_arg::kind::piece_grain, sizeof(cl_long), 1, nullptr, nullptr, {}};
}
inline parallel_arg to_arg(const piece_stride_t&) {
  return {parallel_arg::kind::piece_stride, sizeof(cl_long), 1, nullptr, nullptr, {}};
}
template <class T> parallel_arg to_arg(const per_device<T>& a) {
  return make_value(a.values.data(), a.values.size(), parallel_arg::kind::per_device);
}
template <class T> parallel_arg to_arg(const T& value) {
  static_assert(!std::is_pointer_v<T>, "pass arrays as ringpipe::input / whole_input / output, not pointers");
  return make_value(&value, 1, parallel_arg::kind::value);
}
struct parallel_speeds; // what a parallel_kernel learnt about its devices, kept between runs
} // namespace detail

/// A kernel built for the devices of a run, and the speeds it learnt there; run() it as often as
/// needed (each run's chunks are sized by what the earlier ones measured; a device its pool left
/// idle is measured again now and then, so that one slow measurement does not keep it out).
class parallel_kernel {
public:
  parallel_kernel(runtime& rt, kernel_source source, parallel_for_options options = {});
  ~parallel_kernel();
  parallel_kernel(const parallel_kernel&) = delete;
  parallel_kernel& operator=(const parallel_kernel&) = delete;

  /// Runs the kernel over [0, n); every input and output array holds n elements (whole_input: any
  /// number). Blocks until every index ran once, or throws. Over split arrays (split_array.hpp;
  /// every one laid out alike, n their size, no host arrays): each piece runs on the device that
  /// holds it (or, if that device fails, on one that reaches its memory); the partition of the
  /// options is not used.
  template <class... Args> parallel_for_report run(std::size_t n, const Args&... args) {
    return run_erased(n, {detail::to_arg(args)...});
  }
  const parallel_for_options& options() const noexcept { return options_; }

private:
  parallel_for_report run_erased(std::size_t n, std::vector<detail::parallel_arg> args);
  void check_split_arguments(const std::string& what, std::size_t n,
                             const std::vector<detail::parallel_arg>& args) const;
  kernel_source source_;
  parallel_for_options options_;
  std::unique_ptr<detail::parallel_speeds> speeds_;
};

/// One run of `source` over [0, n) (see parallel_kernel::run).
template <class... Args>
parallel_for_report parallel_for(runtime& rt, const kernel_source& source, std::size_t n, const Args&... args) {
  return parallel_kernel(rt, source).run(n, args...);
}
template <class... Args>
parallel_for_report parallel_for(runtime& rt, const kernel_source& source, const parallel_for_options& options,
                                 std::size_t n, const Args&... args) {
  return parallel_kernel(rt, source, options).run(n, args...);
}

/// out[i] = f(in[i]) for every i, with `f` an OpenCL C function `Out f(In)` defined in `source`.
template <class In, class Out>
parallel_for_report parallel_map(runtime& rt, const std::string& source, const std::string& function,
                                 std::span<const In> in, std::span<Out> out, parallel_for_options options = {}) {
  const std::string wrapper =
      source + "\n__kernel void rp_parallel_map(__global const " + std::string(opencl_type_name<In>()) +
      "* in, __global " + std::string(opencl_type_name<Out>()) + "* out) {\n  const size_t i = get_global_id(0);\n" +
      "  out[i] = " + function + "(in[i]);\n}\n";
  return parallel_kernel(rt, {wrapper, "rp_parallel_map", "", function}, std::move(options))
      .run(in.size(), input_array<In>{in}, output_array<Out>{out});
}

} // namespace ringpipe
