#pragma once
// Ring kernels: OpenCL kernels that consume messages from an input ring and produce into an
// output ring, resident on the device (persistent, parked) or launched per batch (batched).
// A proxy on the runtime launches, relaunches, watches the heartbeat and, on devices without
// shared memory, moves batches through device buffers.

#include <ringpipe/device.hpp>
#include <ringpipe/mode.hpp>
#include <ringpipe/ring.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace ringpipe {

class runtime;

/// The control block, shared with rp_control in cl/ringpipe/stage.clh.
struct control_block {
  alignas(64) std::uint32_t stop;      ///< host side: kernel_stop
  std::uint32_t idle_budget;           ///< host side: empty polls before leaving; idle_forever: never
  alignas(64) std::uint32_t state;     ///< device side: kernel_state
  std::uint32_t error;                 ///< device side: the kernel's error code
  std::uint32_t msgs_in;               ///< device side, wraps
  std::uint32_t msgs_out;              ///< device side, wraps
  std::uint32_t arrivals;              ///< device side: barrier arrivals relayed by the host (wraps)
  alignas(64) std::uint32_t heartbeat; ///< device side, advances on every poll
};
static_assert(offsetof(control_block, state) == 64 && offsetof(control_block, heartbeat) == 128);
static_assert(sizeof(control_block) == 192);
/// control_block::idle_budget of a persistent kernel. Not 0: llvmpipe runs a one-item group in a
/// vector of 8 lanes, and the seven past its end poll too, reading a budget of 0; a 0 that meant
/// "never" kept them polling until the driver cut the launch's loops (RP_IDLE_FOREVER, stage.clh).
inline constexpr std::uint32_t idle_forever = 0xffffffffu;

enum class kernel_stop : std::uint32_t { run = 0, drain = 1, now = 2 };

enum class kernel_state : std::uint32_t {
  idle = 0,     ///< not started, or between batches
  launched = 1, ///< enqueued, not yet running
  running = 2,
  parked = 3,  ///< left after its idle budget (or a batch ran out of work): relaunched on work
  stopped = 4, ///< stopped on request, or its input ended and it closed its output
  faulted = 5, ///< reported an error code, stalled, or failed to launch
};
std::string_view to_string(kernel_state s) noexcept;

/// No ring on this side (sources have no input, sinks no output).
struct no_message {};

/// The value of one of a raw kernel's own arguments, as bytes.
struct kernel_arg {
  std::vector<std::byte> bytes;
  template <class T> static kernel_arg of(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    kernel_arg a;
    a.bytes.resize(sizeof(T));
    std::memcpy(a.bytes.data(), &value, sizeof(T));
    return a;
  }
};

/// Which kernel to run: OpenCL C source (it may `#include` the embedded cl/ files and the user's
/// own) and the name of a kernel declared with RINGPIPE_MAP_KERNEL, RINGPIPE_MAP_KERNEL_WITH_ARGS,
/// RINGPIPE_STATEFUL_KERNEL or RINGPIPE_DECLARE_SIZES.
struct kernel_spec {
  kernel_spec() = default;
  kernel_spec(std::string source_text, std::string kernel_name, std::string options = {})
      : source(std::move(source_text)), name(std::move(kernel_name)), build_options(std::move(options)) {}
  /// Kernel `kernel_name` from the file at `path`: errors name the file, and `#include "x"` looks
  /// next to it first. Throws errc::invalid_argument if the file cannot be read.
  static kernel_spec from_file(const std::string& path, std::string kernel_name, std::string options = {});

  std::string source;
  std::string name;
  std::string build_options; ///< added to the device's defaults
  /// What build errors call the source, e.g. the file it was read from; empty: "kernel 'NAME'".
  std::string source_name;
  /// Where `#include "x"` and `#include <x>` look for the user's files (see resolve_includes).
  std::vector<std::string> include_dirs;
  /// Stateful kernels: bytes of zeroed device memory passed as the argument after
  /// RINGPIPE_KERNEL_PARAMS. It lives as long as the kernel, across relaunches of any mode.
  /// RINGPIPE_STATEFUL_KERNEL declares its size: leave this 0 there.
  std::uint32_t state_bytes = 0;
  /// The kernel's own arguments, in order, after the state argument if there is one.
  std::vector<kernel_arg> args;
};

struct kernel_options {
  /// Forced mode; by default the best the device and budget allow. A resident map kernel whose
  /// mode is not forced, over rings of at least 4,096 slots, hands its stream to spans (batched
  /// launches over every compute unit) while it falls behind (its queue more than 2 ms of its
  /// rate, its output ring under half full), and takes it back when the backlog is gone
  /// (kernel_stats::handovers). A forced mode is kept as it is.
  std::optional<kernel_mode> mode;
  /// Work-items in a round's group; 0: for resident launches device_info::round_group (8 on CPU
  /// devices that keep kernels resident, where a round's cost grows with its group, 64
  /// elsewhere), for launches over a batch (batched rounds, spans) 64; at most the kernel's limit.
  std::uint32_t local_size = 0;
  /// Empty polls before a parked kernel leaves (64 at most where other kernels wait for its worker
  /// or host threads that feed it share its cores: see ring_kernel_base::prefer_parked).
  std::uint32_t idle_budget = 1u << 16;
  /// Messages per batch (device mirror slots) for batched kernels on devices without shared memory;
  /// 0: 1,024, and for map kernels, whose batches run one work-item per message over the whole
  /// device, about 1 MiB of messages (at least 1,024; up to half the input ring with one staging
  /// lane, a quarter with two, so the producer refills as much as is in flight).
  std::uint32_t batch_capacity = 0;
  /// Batches in flight at once for map kernels without SVM: 2 uploads the next batch while the
  /// current one runs (double-buffered staging); 1 runs one batch at a time; 0 chooses: 2 where
  /// copies can overlap kernels (GPUs, accelerators), 1 on CPU devices, whose cores do both.
  std::uint32_t staging_lanes = 0;
  /// A running kernel whose heartbeat does not advance this long, or a launched one that does
  /// not start, is reported as stalled.
  std::chrono::milliseconds stall_timeout{3000};
  /// The same for the first batch of a kernel on a device without shared memory, which includes
  /// the driver compiling it (Mesa's llvmpipe compiles on the first launch: seconds under load).
  std::chrono::milliseconds first_launch_timeout{60000};
};

struct kernel_stats {
  std::uint64_t msgs_in = 0;
  std::uint64_t msgs_out = 0;
  std::uint64_t launches = 0;
  std::uint64_t overlapped_launches = 0; ///< batches launched while an earlier batch was in flight
  /// Work-groups launched: one per launch of a ring kernel; a batched map kernel (over shared
  /// memory or device mirrors) launches one per group of messages of its span, over every
  /// compute unit.
  std::uint64_t work_groups = 0;
  /// Times a resident map kernel that fell behind its input handed the stream to spans (it takes
  /// it back when the backlog is gone); see kernel_options::mode.
  std::uint64_t handovers = 0;
  std::uint32_t heartbeat = 0;
  /// A failed kernel only: messages it took from its input without counting them (rp_count),
  /// i.e. the ones it held when it faulted; neither delivered nor waiting in a ring.
  std::uint64_t lost = 0;
};

/// Holds a batched kernel's launches at a barrier it takes part in through the host (devices
/// without shared memory, or barrier_options::kernels_through_host): the kernel reports an
/// arrival through its control block (rp_barrier_relay) when a launch ends, and the host launches
/// it again once the phase is released. Called on the kernel's runtime strand.
class launch_gate {
public:
  enum class verdict { launch, hold, failed };
  virtual ~launch_gate() = default;
  /// Whether the next launch may start; `failed`: the kernel fails with failure().
  virtual verdict may_launch() = 0;
  /// A launch returned having arrived `count` times (rp_barrier_relay).
  virtual void arrived(std::uint32_t count) = 0;
  virtual std::string failure() const = 0;
  /// Given by the kernel when the gate is set: wakes it to look at the gate again.
  virtual void attach(std::function<void()> wake) = 0;
};

namespace detail {
class kernel_proxy;
}

/// Untyped ring kernel; see ring_kernel<In, Out>.
class ring_kernel_base {
public:
  ring_kernel_base(runtime& rt, const device& dev, kernel_spec spec, std::size_t in_bytes, std::size_t out_bytes,
                   kernel_options options);
  /// Stops the kernel at once (stop_now) if it still runs and releases its OpenCL objects before
  /// returning (a runtime thread must be free to do so). Never throws.
  ~ring_kernel_base();
  ring_kernel_base(const ring_kernel_base&) = delete;
  ring_kernel_base& operator=(const ring_kernel_base&) = delete;

  const std::string& name() const noexcept;
  const device& on_device() const noexcept;
  /// The runtime the kernel was created on.
  runtime& owner() const noexcept;
  /// The mode it runs in: chosen at start(), or forced.
  kernel_mode mode() const noexcept;
  /// Work-items in the group a resident round runs as: kernel_options::local_size, or the
  /// device's default (device_info::round_group); launches over a batch run groups of 64.
  std::uint32_t local_size() const noexcept;
  kernel_state state() const noexcept;
  kernel_stats stats() const noexcept;

  /// Drains what is queued, then stops. Throws errc::timeout naming the kernel, its state and
  /// its rings when it has not stopped within `timeout`; throws the kernel's failure if it failed.
  void stop(std::chrono::nanoseconds timeout = std::chrono::seconds(10));
  void stop(std::chrono::nanoseconds timeout, std::error_code& ec) noexcept;
  /// Asks the kernel to stop at its next poll, leaving what is queued, and returns at once (a
  /// failing pipeline stops its other kernels this way). Never throws.
  void stop_now() noexcept;
  /// Waits until the kernel's last launch has returned and it is stopped or faulted; false if
  /// that took longer than `timeout`. Never throws.
  bool wait_exited(std::chrono::nanoseconds timeout) noexcept;
  /// Gives up on a kernel whose launch does not return (OpenCL cannot kill it): the destructor
  /// then returns at once, and the kernel's memory (rings, control block, queues) stays allocated
  /// until the launch returns, or for good if it never does (reported on stderr). Never throws.
  void detach() noexcept;
  /// Waits until the kernel has stopped (its input ended) and rethrows its failure, if any.
  void wait(std::chrono::nanoseconds timeout = std::chrono::seconds(10));
  /// The failure (fault, stall, launch error) if the kernel failed, else null.
  std::exception_ptr failure() const;
  /// Wakes the proxy: new input is queued. Host pushes and close() on the input ring wake a
  /// sleeping proxy themselves (ring_buffer::want_push_wake), and a ring kernel's launch that
  /// writes the ring on the device marks it while it runs so that the proxy keeps polling
  /// (note_device_producer); this is for input that arrives another way, such as a kernel of
  /// your own pushing on the device (a proxy idle a while sleeps up to 250 ms before it looks
  /// again). While a launch that pops the input itself runs (batched over shared memory), or
  /// every staging lane is taken, the wake waits for that launch's end, which has the proxy look
  /// at the ring again.
  void notify() noexcept;
  /// Before start(): `fn` runs on a runtime thread when the kernel finishes or fails, before
  /// wait_exited() can return (a pipeline waits on its kernels this way, without polling). Several
  /// may be given; each runs in order, and again if a failed launch returns later.
  void on_exit(std::function<void()> fn);
  /// The same, told how the kernel ended and its failure (null unless it failed).
  void on_exit(std::function<void(kernel_state state, std::exception_ptr failure)> fn);
  /// Before start(): `fn` runs on a runtime thread each time the host publishes a launch's results
  /// and gives its input slots back (batched kernels; resident ones publish their own rounds and
  /// never call it). A pipeline wakes the stages on both sides of the kernel this way.
  void on_publish(std::function<void()> fn);

  /// Sets a raw kernel's own argument `index` (counted after RINGPIPE_KERNEL_PARAMS and the state
  /// argument, if any). Before start().
  /// A value that knows how to bind itself (a device_array: its memory, kept alive by the kernel)
  /// does so; any other value is copied as bytes.
  template <class T> void set_arg(unsigned index, const T& value) {
    if constexpr (requires { value.bind_kernel_arg(*this, index); }) {
      value.bind_kernel_arg(*this, index);
    } else {
      static_assert(std::is_trivially_copyable_v<T>);
      set_arg_bytes(index, &value, sizeof(T)); // NOLINT(bugprone-sizeof-expression): a handle (cl_mem) is a value too
    }
  }
  /// Keeps `owner` alive as long as the kernel: memory one of its arguments points into.
  void keep_alive(std::shared_ptr<const void> owner);

  /// Sets a raw kernel's own argument `index` to a pointer into fine-grained SVM of the kernel's
  /// context (e.g. a barrier's seat, bound by ringpipe::barrier). Before start().
  void set_arg_svm(unsigned index, void* pointer);
  /// Before start(): the kernel must stay resident (a barrier participant waits on the device, so
  /// it must never be parked or launched per batch). Forces persistent mode; refused, naming the
  /// kernel, its device and `why`, where another mode is forced or the device cannot.
  void require_resident(std::string_view why);
  /// Before start(): where the runtime chooses the mode, it chooses parked over persistent (a
  /// pipeline whose kernels cannot all stay resident on their pool parks them all);
  /// `leave_when_idle`: the kernel leaves after a few empty polls, not kernel_options::idle_budget
  /// (host threads that feed it need the core its idle spin would hold).
  void prefer_parked(bool leave_when_idle) noexcept;
  /// Before start(): gates the kernel's launches (see launch_gate); a gated kernel runs batched
  /// through device mirrors, also on a device that shares memory. Refused for a kernel forced
  /// into another mode.
  void set_launch_gate(std::shared_ptr<launch_gate> gate);
  bool started() const noexcept;

  /// Throws errc::invalid_argument if any of the kernel's own arguments is not set (start() checks
  /// this too; a pipeline checks every kernel before it starts any).
  void check_arguments() const;
  /// Whether own argument `index` exists and is not set yet.
  bool argument_unset(unsigned index) const;

  /// Starts on untyped rings (for the pipeline layer; slot sizes are still checked).
  void start_buffers(std::shared_ptr<ring_buffer> in, std::shared_ptr<ring_buffer> out) {
    start_untyped(std::move(in), std::move(out));
  }

protected:
  void set_arg_bytes(unsigned index, const void* value, std::size_t size);
  void start_untyped(std::shared_ptr<ring_buffer> in, std::shared_ptr<ring_buffer> out);

private:
  std::shared_ptr<detail::kernel_proxy> proxy_;
};

/// A ring kernel reading In and writing Out (no_message for a side without a ring). The kernel's
/// declared message sizes are checked against sizeof(In)/sizeof(Out) at construction.
template <class In, class Out> class ring_kernel : public ring_kernel_base {
  static constexpr std::size_t bytes_of(std::size_t size, bool none) { return none ? 0 : size; }

public:
  ring_kernel(runtime& rt, const device& dev, kernel_spec spec, kernel_options options = {})
      : ring_kernel_base(rt, dev, std::move(spec), bytes_of(sizeof(In), std::is_same_v<In, no_message>),
                         bytes_of(sizeof(Out), std::is_same_v<Out, no_message>), options) {}

  void start(const ring<In>& in, const ring<Out>& out) { start_untyped(in.shared_buffer(), out.shared_buffer()); }
  /// Starts a kernel with one ring: a source's output, or a sink's input.
  template <class T> void start(const ring<T>& r) {
    // Checked here rather than by two constrained overloads, which clang before 16 rejects for
    // ring_kernel<T, T> (and clang-tidy with it).
    constexpr bool source = std::is_same_v<In, no_message> && std::is_same_v<T, Out>;
    constexpr bool sink = std::is_same_v<Out, no_message> && std::is_same_v<T, In>;
    static_assert(source || sink, "one ring: the output ring of a source or the input ring of a sink");
    if constexpr (source)
      start_untyped(nullptr, r.shared_buffer());
    else
      start_untyped(r.shared_buffer(), nullptr);
  }
};

} // namespace ringpipe
