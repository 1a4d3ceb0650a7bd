#pragma once
// A kernel driver runs one ring kernel over one kind of ring memory: launching it, moving its
// messages where the device cannot reach them, and watching that it makes progress. The proxy
// (proxy.hpp) owns the lifecycle around it (start, stop, failure, reaping) and calls the driver
// on its strand only. Each transport is one driver in files of its own:
//   svm_driver     rings in fine-grained SVM: persistent, parked, or relaunched per batch
//   mirror_driver  rings in host memory: batches copied through device mirrors (1 or 2 lanes)
//   span_driver    batched map kernels over SVM rings: spans the host claims, launched over
//                  the whole device (NAME__span), published by the host in order
// A new transport (e.g. mapped pinned memory on GPUs without fine-grained SVM) is a new driver
// and one more case in make_driver(); the others do not change.

#include "image.hpp"
#include "mode_choice.hpp"

#include <ringpipe/kernel.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>

namespace ringpipe::detail {

/// Empty polls before a parked kernel leaves where its idle spin keeps others from running: other
/// kernels wait for its worker, or its pool's workers are host threads and the pipeline parks
/// several kernels there (residency.cpp). 64 polls are a few microseconds.
inline constexpr std::uint32_t short_idle_budget = 64;

/// RP_ERROR_ROUND_TOO_LONG (stage.clh): a launch's first round, or a span's item, was cut short by
/// the driver on its own (llvmpipe's loop limit): relaunched, it would be cut again.
inline constexpr std::uint32_t error_round_too_long = 0xffff0003u;

/// What the proxy offers its driver (called on the proxy's strand).
class kernel_lifecycle {
public:
  virtual kernel_stop stop_requested() const noexcept = 0;
  /// Takes a device worker for the next launch; false: every worker is held, retry later.
  virtual bool acquire_worker() = 0;
  virtual void release_worker() noexcept = 0;
  /// The kernel left for good; returns false (no progress) for the caller's convenience.
  virtual bool finish(kernel_state state) = 0;
  virtual void fail(std::exception_ptr e) = 0;
  /// Interprets the state a launch returned in; true when the kernel goes on.
  virtual bool after_exit(kernel_state state, std::uint32_t code) = 0;
  /// Whether the proxy has finished or is reaping a failed launch (the driver stops work).
  virtual bool leaving() const noexcept = 0;
  /// Any thread: step soon (a launch completed).
  virtual void wake() = 0;
  /// Any thread: a launch whose results the next step publishes completed (wake_on_complete).
  virtual void launch_completed() { wake(); }
  /// Before enqueueing a launch that pops its input ring itself (or takes the last free staging
  /// lane) and whose completion wakes the proxy or calls launch_ended(): input pushed meanwhile
  /// does not wake the proxy (input_wake_gate).
  virtual void hold_input_wakes() noexcept = 0;
  /// Before reading the input ring again once such a launch was seen to return.
  virtual void release_input_wakes() noexcept = 0;
  /// Any thread: the launch returned; wakes the proxy if input came while it ran.
  virtual void launch_ended() = 0;
  /// The driver published results and gave input slots back: the neighbours may go on.
  virtual void published() = 0;

protected:
  ~kernel_lifecycle() = default;
};

/// Counters and state other threads read.
struct kernel_counters {
  std::atomic<std::uint64_t> msgs_in{0}, msgs_out{0}, launches{0}, overlapped{0}, work_groups{0}, handovers{0};
  std::atomic<kernel_state> state{kernel_state::idle};
};

/// Everything a driver works on; it outlives the driver.
struct driver_context {
  const device& dev;
  kernel_image& image;
  const kernel_options& options;
  kernel_mode mode;
  ring_buffer& in;  ///< a closed empty ring when the kernel has no input
  ring_buffer& out; ///< an unread ring when the kernel has no output
  bool has_input;
  bool has_output;
  kernel_counters& counters;
  kernel_lifecycle& life;
  launch_gate* gate = nullptr; ///< mirrored kernels at a barrier: launches wait for its phases
};

class kernel_driver {
public:
  virtual ~kernel_driver() = default;
  /// One step: launch, complete, copy, watch. True when it made progress.
  virtual bool step() = 0;
  /// A stop was asked (any thread): tell the running kernel if the driver can.
  virtual void stop_requested(kernel_stop stop) noexcept = 0;
  /// Whether a launch is enqueued and has not returned.
  virtual bool in_flight() const noexcept = 0;
  /// After a failure: whether the launch in flight has returned (then it can be released).
  virtual bool launch_returned() = 0;
  /// Messages taken from the input ring that the kernel did not count (rp_count).
  virtual std::uint64_t uncounted() const noexcept = 0;
  /// The kernel's heartbeat, where the host can read it (0 elsewhere).
  virtual std::uint32_t heartbeat() const noexcept { return 0; }
  /// Whether every launch slot is taken and the first launch to return wakes the proxy: until
  /// then an idle proxy has nothing to poll for but a stall, and sleeps its ceiling.
  virtual bool completion_wakes() const noexcept { return false; }
  /// Output slots the last step waited for and did not find (its output ring was full, or short
  /// of what the driver launches for): a pop from that ring is what it waits for. 0: none.
  virtual std::uint32_t room_wanted() const noexcept { return 0; }
  /// The longest sleep between idle steps.
  virtual std::chrono::microseconds idle_ceiling() const noexcept { return std::chrono::microseconds(1000); }
  /// Releases every OpenCL object (after the last launch returned). Never throws.
  virtual void release() noexcept = 0;
  /// A resident launch returns (parked) after its current round: another driver takes the stream.
  virtual void yield() noexcept {}
  /// Another driver moved the rings: go on from where they are.
  virtual void take_over() noexcept {}
};

std::unique_ptr<kernel_driver> make_svm_driver(const driver_context& c);
std::unique_ptr<kernel_driver> make_mirror_driver(const driver_context& c);
std::unique_ptr<kernel_driver> make_span_driver(const driver_context& c);
std::unique_ptr<kernel_driver> make_adaptive_driver(const driver_context& c);

/// Whether a kernel runs as spans where batched: a map kernel with its span form, both rings
/// present and wide enough that spans pay for their launches.
inline bool spans_worthwhile(const driver_context& c) {
  return c.has_input && c.has_output && c.image.span_kernel() != nullptr &&
         std::min(c.in.capacity(), c.out.capacity()) >= 4096;
}

inline std::unique_ptr<kernel_driver> make_driver(kernel_transport t, const driver_context& c) {
  switch (t) {
  case kernel_transport::shared_memory:
    // Over narrow rings a batched ring kernel does better: it keeps consuming while the producer
    // refills, where spans of a fraction of the ring would pay a launch every few hundred messages.
    if (c.mode == kernel_mode::batched && spans_worthwhile(c)) return make_span_driver(c);
    // A resident kernel whose mode nobody forced hands its stream to spans while it falls behind.
    if (c.mode != kernel_mode::batched && !c.options.mode && spans_worthwhile(c)) return make_adaptive_driver(c);
    return make_svm_driver(c);
  case kernel_transport::mirrored: return make_mirror_driver(c);
  }
  return nullptr;
}

} // namespace ringpipe::detail
