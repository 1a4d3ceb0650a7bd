// The mirrored driver's ring-kernel batches (mirror_driver.hpp); spans are in mirror_spans.cpp.

#include "mirror_driver.hpp"
#include "mode_choice.hpp"

#include <cstddef>
#include <cstring>
#include <vector>

namespace ringpipe::detail {

using clock = std::chrono::steady_clock;

mirror_driver::mirror_driver(const driver_context& c) : c_(c), relay_(std::make_shared<wake_relay>(c.life)) {
  // Not at a barrier: a span cannot arrive at one (its kernel runs no rounds).
  spans_ = c.image.span_kernel() != nullptr && c.has_input && c.has_output && c.gate == nullptr;
  // Two lanes only for map kernels: they consume whole batches, so the next batch's window is
  // known before the current one returns (see RP_KIND_MAP in stage.clh).
  ring_copies_ = c.dev.info().type == device_type::cpu;
  const unsigned wanted = staging_lanes(c.options.staging_lanes, ring_copies_);
  lane_count_ = c.image.map_kernel() && c.has_input && c.has_output && wanted >= 2 ? 2 : 1;
  // Spans take at least 2: llvmpipe's loop probe reads a capacity above 1 (mirror_spans.cpp).
  mirror_capacity_ = spans_ ? 2 : 1;
  while (mirror_capacity_ < batch_capacity(c, spans_, lane_count_))
    mirror_capacity_ <<= 1;
  const std::uint32_t budget = c.mode == kernel_mode::parked ? std::max(1u, c.options.idle_budget) : 1u;
  cl_call("clCreateBuffer (batch mirrors)", [&] {
    const auto& ctx = c.dev.context();
    queue_ = cl::CommandQueue(ctx, c.dev.cl_device());
    // Copies get queues of their own only where they can overlap a running batch.
    upload_ = lane_count_ > 1 ? cl::CommandQueue(ctx, c.dev.cl_device()) : queue_;
    download_ = lane_count_ > 1 ? cl::CommandQueue(ctx, c.dev.cl_device()) : queue_;
    ctl_ = cl::Buffer(ctx, CL_MEM_READ_WRITE, sizeof(control_block));
    control_block initial{};
    initial.idle_budget = budget;
    queue_.enqueueWriteBuffer(ctl_, CL_TRUE, 0, sizeof(control_block), &initial);
    c.image.kernel().setArg(0, ctl_);
    if (spans_) c.image.span_kernel()->setArg(0, ctl_); // the span form leaves it alone
    const std::size_t in_bytes = std::size_t{mirror_capacity_} * c.in.slot_size();
    const std::size_t out_bytes = std::size_t{mirror_capacity_} * c.out.slot_size();
    for (unsigned i = 0; i < lane_count_; ++i) {
      auto& l = lanes_[i];
      l.in_mirror = cl::Buffer(ctx, CL_MEM_READ_WRITE, sizeof(ring_header) + in_bytes);
      l.out_mirror = cl::Buffer(ctx, CL_MEM_READ_WRITE, sizeof(ring_header) + out_bytes);
      if (!ring_copies_) {
        l.in_staging = pinned_memory(ctx, queue_, in_bytes);
        l.out_staging = pinned_memory(ctx, queue_, out_bytes);
      }
      if (spans_) {
        l.keep_mirror = cl::Buffer(ctx, CL_MEM_READ_WRITE, mirror_capacity_);
        l.keep_staging = pinned_memory(ctx, queue_, mirror_capacity_);
        write_span_header(l);
      }
    }
    return 0;
  });
  heartbeat_stamp_ = clock::now();
}

// Launches a batch into the next free lane, behind the lanes in flight; false if there is nothing
// to launch (or the kernel finished).
bool mirror_driver::launch_batch() {
  auto& in = c_.in;
  auto& out = c_.out;
  const auto stop = c_.life.stop_requested();
  room_wanted_ = 0;
  std::uint32_t ahead = 0; // messages claimed by the lane in flight
  // Where this batch's results may land: past the slots the lane in flight may fill (with ring
  // copies they stay there until it completes, behind a gap where an earlier lane dropped results).
  std::uint32_t out_at = c_.has_output ? out.load_head(std::memory_order_relaxed) : 0;
  if (in_flight_lanes_ > 0) {
    // Behind a batch only when that batch will consume everything it holds and go on.
    const mirror_lane& last = lanes_[(front_ + in_flight_lanes_ - 1) % lane_count_];
    if (stop != kernel_stop::run || last.ends_stream || last.stop_word != 0) return false;
    ahead = last.n;
    out_at = last.out_at + last.n;
  } else if (stop == kernel_stop::now) {
    return c_.life.finish(kernel_state::stopped);
  }
  if (c_.gate != nullptr && !gate_open()) return false;
  // Closed is read before the size: a close read after it may follow pushes the size missed, and
  // the batch would then end the stream without them (seen: vector_add lost jobs on rusticl).
  const bool closed = c_.has_input && in.closed();
  const bool end = in_flight_lanes_ == 0 && c_.has_input && in.drained();
  const std::uint32_t queued = c_.has_input ? in.size() - ahead : 0;
  // A second lane for a full half mirror or the stream's last messages only: a trickle waits for
  // the running batch, which keeps batches large (each launch has a fixed cost).
  if (in_flight_lanes_ > 0 && queued < mirror_capacity_ / 2 && !closed) return false;
  std::uint32_t n = c_.has_input ? std::min(queued, mirror_capacity_) : mirror_capacity_;
  const std::uint32_t out_ahead = c_.has_output ? out_at - out.load_head(std::memory_order_relaxed) : 0;
  if (c_.has_output) n = std::min(n, out.space() - out_ahead);
  if (n == 0 && !end) {
    if (queued > 0) room_wanted_ = 1; // held by a full output
    if (in_flight_lanes_ == 0 && stop == kernel_stop::drain && queued == 0)
      return c_.life.finish(kernel_state::stopped);
    return false;
  }
  if (spans_ && n == 0) { // the stream ends with nothing left to run: a span has no summary to add
    c_.out.close();
    return c_.life.after_exit(kernel_state::stopped, 0);
  }
  if (!c_.life.acquire_worker()) return false;
  mirror_lane& l = lanes_[(front_ + in_flight_lanes_) % lane_count_];
  l.n = n;
  l.tail = in.load_tail(std::memory_order_relaxed) + ahead;
  l.out_at = out_at;
  l.ends_stream = end || (closed && n == queued);

  l.in_header = {};
  l.in_header.head = c_.has_input ? n : 0;
  l.in_header.capacity = mirror_capacity_;
  l.in_header.slot_size = in.slot_size();
  l.in_header.mask = mirror_capacity_ - 1;
  l.in_header.flags = (l.ends_stream || !c_.has_input) ? ring_closed : 0;
  l.out_header = {};
  l.out_header.capacity = c_.has_output ? mirror_capacity_ : 1;
  l.out_header.slot_size = out.slot_size();
  l.out_header.mask = l.out_header.capacity - 1;
  // Room for the n results the host ring can take (a map kernel emits at most one per message) and,
  // at the end of the stream, one more where the ring has it: a stateful kernel's summary. The
  // mirror looks full but for its last `room` slots, so the results land there contiguously.
  const std::uint32_t room = spans_ ? n
                             : c_.has_output
                                 ? std::min({n + (l.ends_stream ? 1u : 0u), out.space() - out_ahead, mirror_capacity_})
                                 : l.out_header.capacity;
  l.room = room;
  l.out_header.head = l.out_header.capacity - room;
  l.out_start = l.out_header.head;
  // The mirror holds only this batch: a drain request applies once the batch is all that is left.
  const bool batch_is_everything = !c_.has_input || n == queued;
  l.stop_word =
      static_cast<std::uint32_t>(stop == kernel_stop::drain && !batch_is_everything ? kernel_stop::run : stop);
  l.state_word = static_cast<std::uint32_t>(kernel_state::launched);
  if (c_.has_input && n > 0 && !ring_copies_) in.copy_out(l.tail, n, l.in_staging.data());

  // With every lane taken, a push can launch nothing until one returns, which wakes the proxy.
  if (in_flight_lanes_ + 1 == lane_count_) c_.life.hold_input_wakes();
  cl_call("batched launch", [&] {
    spans_ ? enqueue_span(l) : enqueue_chain(l);
    // The proxy steps as the chain completes, not at its next poll (up to a millisecond later).
    wake_on_complete(l.done, relay_);
    upload_.flush();
    queue_.flush();
    download_.flush();
    return 0;
  });
  if (in_flight_lanes_ == 0)
    heartbeat_stamp_ = clock::now();
  else
    c_.counters.overlapped.fetch_add(1, std::memory_order_relaxed);
  ++in_flight_lanes_;
  running_ = l.done;
  c_.counters.launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void mirror_driver::enqueue_chain(mirror_lane& l) {
  const std::size_t out_size = c_.out.slot_size();
  const std::uint32_t local = c_.image.batch_local_size();
  std::vector<cl::Event> uploaded(1), computed(1);
  upload_.enqueueWriteBuffer(l.in_mirror, CL_FALSE, 0, sizeof(ring_header), &l.in_header);
  if (c_.has_input && l.n > 0) upload_messages(l, sizeof(ring_header), nullptr);
  upload_.enqueueWriteBuffer(l.out_mirror, CL_FALSE, 0, sizeof(ring_header), &l.out_header, nullptr, &uploaded[0]);
  // Only the host's words of the control block: the counters are the kernel's, and a lane queued
  // behind another must not overwrite what the earlier launch writes.
  queue_.enqueueWriteBuffer(ctl_, CL_FALSE, offsetof(control_block, stop), sizeof(l.stop_word), &l.stop_word);
  queue_.enqueueWriteBuffer(ctl_, CL_FALSE, offsetof(control_block, state), sizeof(l.state_word), &l.state_word);
  auto& kernel = c_.image.kernel();
  kernel.setArg(1, l.in_mirror);
  kernel.setArg(2, l.out_mirror);
  queue_.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(local), cl::NDRange(local), &uploaded);
  queue_.enqueueReadBuffer(ctl_, CL_FALSE, 0, sizeof(control_block), &l.ctl, nullptr, &computed[0]);
  download_.enqueueReadBuffer(l.in_mirror, CL_FALSE, 0, sizeof(ring_header), &l.in_header, &computed);
  if (c_.has_output && l.room > 0)
    download_results(l, l.out_mirror, sizeof(ring_header) + l.out_start * out_size, l.room, nullptr);
  download_.enqueueReadBuffer(l.out_mirror, CL_FALSE, 0, sizeof(ring_header), &l.out_header, nullptr, &l.done);
  c_.counters.work_groups.fetch_add(1, std::memory_order_relaxed);
}

// A lane's chain has completed: hand its results on and return its input slots.
bool mirror_driver::complete_batch(mirror_lane& l) {
  if (spans_) return complete_span(l);
  ++returned_batches_;
  const std::uint32_t produced = l.out_header.head - l.out_start;
  if (produced > l.room) throw error(errc::kernel_fault, "produced more results than the batch had room for");
  if (c_.has_output && produced > 0) {
    if (landed(l, 0) != front(l, 0)) // behind a lane that produced less than its batch
      for (std::uint32_t i = 0; i < produced; ++i)
        std::memcpy(front(l, i), landed(l, i), c_.out.slot_size());
    push_results(l, produced);
  }
  const std::uint32_t consumed = l.in_header.tail;
  if (c_.has_input && consumed > 0) c_.in.publish_tail(l.tail + consumed);
  mirrored_in_ += consumed;
  const std::uint32_t counted = l.ctl.msgs_in - counted_so_far_;
  counted_so_far_ = l.ctl.msgs_in;
  if (consumed > counted) uncounted_ += consumed - counted;
  mirrored_out_ += produced;
  c_.counters.msgs_in.store(mirrored_in_, std::memory_order_relaxed);
  c_.counters.msgs_out.store(mirrored_out_, std::memory_order_relaxed);
  if (l.out_header.flags & ring_closed && c_.has_output) c_.out.close();
  if (consumed > 0 || produced > 0) c_.life.published();
  const auto exit_state = static_cast<kernel_state>(l.ctl.state);
  if (in_flight_lanes_ > 0 && consumed < l.n && exit_state != kernel_state::faulted) {
    // The next lane's window started after this batch: its results would come out of order.
    throw error(errc::kernel_fault, "consumed " + std::to_string(consumed) + " of its batch of " + std::to_string(l.n) +
                                        " while the next batch was queued (a map kernel consumes every message)");
  }
  if (in_flight_lanes_ == 0) c_.life.release_worker();
  if (const std::uint32_t arrivals = l.ctl.arrivals - arrivals_so_far_; c_.gate != nullptr && arrivals != 0) {
    arrivals_so_far_ = l.ctl.arrivals;
    c_.gate->arrived(arrivals);
  }
  return c_.life.after_exit(exit_state, l.ctl.error) || consumed > 0;
}

// A kernel at a barrier through the host launches again once its phase is released.
bool mirror_driver::gate_open() {
  switch (c_.gate->may_launch()) {
  case launch_gate::verdict::launch: return true;
  case launch_gate::verdict::hold: return false;
  case launch_gate::verdict::failed: break;
  }
  c_.life.fail(std::make_exception_ptr(
      error(errc::kernel_fault, "kernel '" + c_.image.name() + "' on device '" + c_.dev.name() +
                                    "' left because a barrier it waited at failed: " + c_.gate->failure())));
  return false;
}

// The oldest lane has not returned within the stall timeout: true if that is reported. The kernel
// cannot be told to stop (its control block is a device buffer), so it is reaped when it returns.
bool mirror_driver::watch_batch(const mirror_lane& l) {
  const auto waited = clock::now() - heartbeat_stamp_;
  // The first batch also pays for the driver compiling the kernel (llvmpipe does it then).
  const auto allowance = returned_batches_ > 0 ? std::chrono::nanoseconds(c_.options.stall_timeout)
                                               : std::max<std::chrono::nanoseconds>(c_.options.stall_timeout,
                                                                                    c_.options.first_launch_timeout);
  if (waited < allowance) return false;
  c_.life.fail(std::make_exception_ptr(
      error(errc::stalled, "kernel '" + c_.image.name() + "' on device '" + c_.dev.name() + "' stalled: its batch of " +
                               std::to_string(l.n) + " messages from ring '" + c_.in.name() +
                               "' has not returned after " + ms(waited))));
  return true;
}

std::unique_ptr<kernel_driver> make_mirror_driver(const driver_context& c) {
  return std::make_unique<mirror_driver>(c);
}

} // namespace ringpipe::detail
