// The span driver: batched map kernels whose rings are in the device's fine-grained SVM. The host
// claims a span of the input ring (contiguous: it never wraps, and the output ring has room for a
// result per message), launches the kernel's span form (NAME__span, stage.clh) with one work-item
// per message, so that every compute unit of the device works on it, and publishes the span when
// the launch returns: results moved down over dropped messages, the output head advanced, the
// input slots given back. Up to four spans are in flight and published in launch order. This is
// what a hand-written batched program does, without its copies: the rings are the batches.

#include "driver.hpp"
#include "image.hpp"
#include "launch_wake.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

namespace ringpipe::detail {
namespace {

using clock = std::chrono::steady_clock;
constexpr unsigned max_spans = 4;
constexpr std::uint32_t first_span = 256; // spans start small and double while they return quickly

struct span {
  std::uint32_t tail = 0;   // input counter of its first message
  std::uint32_t out_at = 0; // output counter of its first (provisional) result
  std::uint32_t n = 0;
  std::uint32_t local = 0;      // work-items per group: the group size, or 1 for a short span
  std::uint8_t* keep = nullptr; // n flags in SVM: 0 where the message was dropped
  cl::Event done;
};

template <class T> T* svm_alloc(const device& dev, std::size_t bytes, const std::string& kernel, const char* what) {
  void* p = clSVMAlloc(dev.context()(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, bytes, 64);
  if (p == nullptr)
    throw error(errc::out_of_memory, "kernel '" + kernel + "': clSVMAlloc of its " + what + " (" +
                                         std::to_string(bytes) + " bytes) failed on device '" + dev.name() + "'");
  std::memset(p, 0, bytes);
  return static_cast<T*>(p);
}

class span_driver final : public kernel_driver {
public:
  explicit span_driver(const driver_context& c)
      : c_(c), kernel_(*c.image.span_kernel()), relay_(std::make_shared<wake_relay>(c.life)) {
    const std::uint32_t local = c.image.batch_local_size();
    max_span_ = std::max(local, std::min(c.in.capacity(), c.out.capacity()) / 8);
    span_limit_ = std::min(max_span_, std::max(local, first_span));
    queue_ = cl_call("clCreateCommandQueue", [&] { return cl::CommandQueue(c.dev.context(), c.dev.cl_device()); });
    ctl_ = svm_alloc<control_block>(c.dev, sizeof(control_block), c.image.name(), "control block");
    keep_ = svm_alloc<std::uint8_t>(c.dev, std::size_t{max_spans} * max_span_, c.image.name(), "keep flags");
    cl_call("clSetKernelArgSVMPointer", [&] {
      void* args[3] = {ctl_, c.in.header(), c.out.header()};
      for (cl_uint i = 0; i < 3; ++i)
        if (const cl_int s = clSetKernelArgSVMPointer(kernel_(), i, args[i]); s != CL_SUCCESS) throw cl::Error(s);
      return 0;
    });
    committed_tail_ = c.in.load_tail(std::memory_order_acquire);
    committed_head_ = c.out.load_head(std::memory_order_relaxed);
  }
  ~span_driver() override { release(); }

  bool step() override {
    bool progress = false;
    while (count_ > 0) {
      span& s = spans_[front_];
      const auto status = s.done.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
      if (status < 0) throw_opencl_error(status, "span launch");
      if (status != CL_COMPLETE) {
        if (stalled(s)) return false;
        break;
      }
      publish(s);
      c_.life.release_input_wakes(); // a span slot is free: pushes may launch one
      front_ = (front_ + 1) % max_spans;
      front_since_ = clock::now();
      progress = true;
      if (--count_ == 0) c_.life.release_worker();
    }
    if (c_.life.leaving()) return false;
    const auto stop = c_.life.stop_requested();
    if (stop == kernel_stop::now) return count_ == 0 ? c_.life.finish(kernel_state::stopped) : progress;
    while (count_ < max_spans && launch())
      progress = true;
    if (count_ > 0) return progress;
    if (c_.in.drained()) {
      c_.out.close(); // end of stream travels on
      return c_.life.after_exit(kernel_state::stopped, 0);
    }
    if (stop == kernel_stop::drain && c_.in.size() == 0) return c_.life.finish(kernel_state::stopped);
    if (progress) c_.life.after_exit(kernel_state::parked, 0);
    return progress;
  }

  // A span is bounded work: a stop takes effect when the spans in flight return.
  void stop_requested(kernel_stop) noexcept override {}
  bool in_flight() const noexcept override { return count_ > 0; }
  bool completion_wakes() const noexcept override { return count_ == max_spans; }
  std::uint32_t room_wanted() const noexcept override { return room_wanted_; }
  bool launch_returned() override {
    if (count_ == 0) return true;
    // One in-order queue: the last span returns last.
    const auto status = spans_[(front_ + count_ - 1) % max_spans].done.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
    if (status == CL_COMPLETE || status < 0) count_ = 0;
    return count_ == 0;
  }
  void take_over() noexcept override {
    committed_tail_ = c_.in.load_tail(std::memory_order_acquire);
    committed_head_ = c_.out.load_head(std::memory_order_acquire);
  }
  // Spans are counted as they are published, and an unpublished span leaves its messages queued.
  std::uint64_t uncounted() const noexcept override { return 0; }
  std::chrono::microseconds idle_ceiling() const noexcept override { return std::chrono::microseconds(200); }
  void release() noexcept override {
    relay_->cut();
    if (queue_()) clFinish(queue_());
    for (void* p : {static_cast<void*>(ctl_), static_cast<void*>(keep_)})
      if (p != nullptr) clSVMFree(c_.dev.context()(), p);
    ctl_ = nullptr;
    keep_ = nullptr;
    spans_ = {};
    queue_ = cl::CommandQueue();
    kernel_ = cl::Kernel(); // the image shelves it for the next user
  }

private:
  bool launch();
  void publish(const span& s);
  bool stalled(const span& s);

  driver_context c_;
  cl::Kernel& kernel_;
  std::shared_ptr<wake_relay> relay_;
  cl::CommandQueue queue_;
  control_block* ctl_ = nullptr; // the ring kernel's first argument; the span form leaves it alone
  std::uint8_t* keep_ = nullptr; // max_spans * max_span_ flags
  std::uint32_t max_span_ = 0;
  std::uint32_t span_limit_ = 0; // grows toward max_span_ while spans return well within the stall timeout
  std::array<span, max_spans> spans_;
  unsigned front_ = 0, count_ = 0;
  std::uint32_t committed_tail_ = 0, committed_head_ = 0; // what the rings' other ends see
  std::uint32_t next_tail_ = 0, next_out_ = 0;            // after the last span launched
  clock::time_point front_since_;                         // when the oldest span in flight could start
  bool returned_groups_ = false, returned_ones_ = false;  // a span of each group size returned
  std::uint32_t room_wanted_ = 0;                         // the last launch found too little room
};

// Claims the next span and launches it behind those in flight; false if there is none to claim.
bool span_driver::launch() {
  room_wanted_ = 0;
  if (count_ == 0) {
    next_tail_ = committed_tail_;
    next_out_ = committed_head_;
  }
  const std::uint32_t queued = c_.in.load_head(std::memory_order_acquire) - next_tail_;
  if (queued == 0) return false;
  // Behind a running span only for half a span or the stream's last messages: a trickle waits,
  // which keeps spans large (each launch has a fixed cost).
  if (count_ > 0 && queued < span_limit_ / 2 && !c_.in.closed()) return false;
  const std::uint32_t room = c_.out.capacity() - (next_out_ - c_.out.load_tail(std::memory_order_acquire));
  // A consumer that lags frees room a little at a time: waiting for a quarter span of it keeps
  // spans large (fewer launches, fewer threads woken) where throughput is all that counts.
  if (room < queued && room < span_limit_ / 4) {
    room_wanted_ = std::min(queued, span_limit_ / 4); // held by its output's consumer
    return false;
  }
  const std::uint32_t in_first = next_tail_ & (c_.in.capacity() - 1);
  const std::uint32_t out_first = next_out_ & (c_.out.capacity() - 1);
  std::uint32_t n = std::min({queued, room, span_limit_, c_.in.capacity() - in_first, c_.out.capacity() - out_first});
  if (n == 0) return false;
  // Whole groups, one work-item per message: the rest waits for the next span, unless less than
  // a group is all there is (then groups of one item).
  const std::uint32_t group = c_.image.batch_local_size();
  const std::uint32_t local = n >= group ? group : 1;
  n -= n % local;
  if (count_ == 0 && !c_.life.acquire_worker()) return false;
  const unsigned index = (front_ + count_) % max_spans;
  span& s = spans_[index];
  s.tail = next_tail_;
  s.out_at = next_out_;
  s.n = n;
  s.local = local;
  s.keep = keep_ + std::size_t{index} * max_span_;
  // With every span slot taken, a push can launch nothing until a span returns, which wakes the proxy.
  if (count_ + 1 == max_spans) c_.life.hold_input_wakes();
  cl_call("span launch", [&] {
    const unsigned at = c_.image.span_args_at();
    if (const cl_int e = clSetKernelArgSVMPointer(kernel_(), at, s.keep); e != CL_SUCCESS) throw cl::Error(e);
    kernel_.setArg(at + 1, in_first);
    kernel_.setArg(at + 2, out_first);
    queue_.enqueueNDRangeKernel(kernel_, cl::NullRange, cl::NDRange(n), cl::NDRange(local), nullptr, &s.done);
    wake_on_complete(s.done, relay_);
    queue_.flush();
    return 0;
  });
  if (count_ == 0) front_since_ = clock::now();
  if (count_ > 0) c_.counters.overlapped.fetch_add(1, std::memory_order_relaxed);
  ++count_;
  next_tail_ += n;
  next_out_ += n;
  c_.counters.launches.fetch_add(1, std::memory_order_relaxed);
  c_.counters.work_groups.fetch_add(n / local, std::memory_order_relaxed);
  c_.counters.state.store(kernel_state::running, std::memory_order_relaxed);
  return true;
}

// The oldest span returned: its results become visible in order, its input slots go back. After
// a stop-now request it is dropped instead: its messages stay queued, its results unseen.
void span_driver::publish(const span& s) {
  const auto took = clock::now() - front_since_;
  (s.local == 1 ? returned_ones_ : returned_groups_) = true;
  if (s.n == span_limit_) {
    if (took < c_.options.stall_timeout / 16) span_limit_ = std::min(max_span_, span_limit_ * 2);
    if (took > c_.options.stall_timeout / 4) span_limit_ = std::max(c_.image.batch_local_size(), span_limit_ / 2);
  }
  if (c_.life.stop_requested() == kernel_stop::now) return;
  std::uint32_t kept = s.n;
  if (committed_head_ != s.out_at || std::memchr(s.keep, 0, s.n) != nullptr) {
    // Dropped messages here or in an earlier span: move the results down to the published head.
    const auto bytes = c_.out.slot_size();
    kept = 0;
    for (std::uint32_t i = 0; i < s.n; ++i) {
      if (s.keep[i] == 0) continue;
      const std::uint32_t to = committed_head_ + kept++;
      if (to != s.out_at + i) std::memcpy(c_.out.slot(to), c_.out.slot(s.out_at + i), bytes);
    }
  }
  committed_head_ += kept;
  committed_tail_ = s.tail + s.n;
  c_.out.publish_head(committed_head_);
  c_.in.publish_tail(committed_tail_);
  c_.counters.msgs_in.fetch_add(s.n, std::memory_order_relaxed);
  c_.counters.msgs_out.fetch_add(kept, std::memory_order_relaxed);
  c_.life.published();
}

// The oldest span has not returned within the stall timeout: true if that is reported. Its kernel
// is reaped when it returns.
bool span_driver::stalled(const span& s) {
  const auto waited = clock::now() - front_since_;
  // The first span of each group size also pays for the device compiling the kernel for it.
  const bool first = !(s.local == 1 ? returned_ones_ : returned_groups_);
  const auto allowance =
      first ? std::max(c_.options.stall_timeout, c_.options.first_launch_timeout) : c_.options.stall_timeout;
  if (waited < allowance) return false;
  c_.life.fail(std::make_exception_ptr(
      error(errc::stalled, "kernel '" + c_.image.name() + "' on device '" + c_.dev.name() + "' stalled: its span of " +
                               std::to_string(s.n) + " messages from ring '" + c_.in.name() +
                               "' has not returned after " + ms(waited))));
  return true;
}

} // namespace

std::unique_ptr<kernel_driver> make_span_driver(const driver_context& c) { return std::make_unique<span_driver>(c); }

} // namespace ringpipe::detail
