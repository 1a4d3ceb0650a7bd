// The shared-memory driver: the kernel's rings and control block live in fine-grained SVM, so the
// kernel polls its rings itself and the host only launches it, watches its heartbeat and reads
// its counters. Persistent kernels are launched once; parked ones leave after an idle budget and
// are relaunched on work; batched ones leave when their input runs dry.

#include "driver.hpp"
#include "image.hpp"
#include "launch_wake.hpp"

#include <ringpipe/occupancy.hpp>

#include <cstring>

namespace ringpipe::detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t stop_yield = 3; // RP_STOP_YIELD in stage.clh

std::uint32_t load_ctl(const std::uint32_t& field) {
  return std::atomic_ref(const_cast<std::uint32_t&>(field)).load(std::memory_order_acquire);
}
void store_ctl(std::uint32_t& field, std::uint32_t v) { std::atomic_ref(field).store(v, std::memory_order_release); }

class svm_driver final : public kernel_driver {
public:
  explicit svm_driver(const driver_context& c) : c_(c), relay_(std::make_shared<wake_relay>(c.life)) {
    queue_ = cl_call("clCreateCommandQueue", [&] { return cl::CommandQueue(c.dev.context(), c.dev.cl_device()); });
    ctl_ = static_cast<control_block*>(clSVMAlloc(c.dev.context()(),
                                                  CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS,
                                                  sizeof(control_block), 64));
    if (ctl_ == nullptr)
      throw error(errc::out_of_memory, "kernel '" + c.image.name() +
                                           "': clSVMAlloc of its control block failed on "
                                           "device '" +
                                           c.dev.name() + "'");
    std::memset(static_cast<void*>(ctl_), 0, sizeof(control_block));
    idle_budget_now_ = c.mode == kernel_mode::persistent ? idle_forever
                       : c.mode == kernel_mode::parked   ? std::max(1u, c.options.idle_budget)
                                                         : 1u;
    ctl_->idle_budget = idle_budget_now_;
    cl_call("clSetKernelArgSVMPointer", [&] {
      void* args[3] = {ctl_, c.in.header(), c.out.header()};
      for (cl_uint i = 0; i < 3; ++i)
        if (const cl_int s = clSetKernelArgSVMPointer(c.image.kernel()(), i, args[i]); s != CL_SUCCESS)
          throw cl::Error(s);
      return 0;
    });
    heartbeat_stamp_ = clock::now();
    last_tail_ = c.in.load_tail(std::memory_order_acquire);
  }
  ~svm_driver() override { release(); }

  bool step() override {
    if (in_flight_) {
      observe_counters();
      const auto status = running_.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
      if (status < 0) throw_opencl_error(status, "kernel execution");
      if (status != CL_COMPLETE) {
        watch_heartbeat();
        yield_when_contended();
        return false;
      }
      launch_returned_now();
      c_.life.release_input_wakes();
      c_.life.release_worker();
      observe_counters();
      return c_.life.after_exit(static_cast<kernel_state>(load_ctl(ctl_->state)), load_ctl(ctl_->error));
    }
    const auto stop = c_.life.stop_requested();
    if (stop == kernel_stop::now) return c_.life.finish(kernel_state::stopped);
    const bool input_ready = !c_.has_input || c_.in.size() > 0;
    const bool output_room = !c_.has_output || c_.out.space() > 0;
    const bool end_pending = c_.has_input && c_.in.drained();
    room_wanted_ = input_ready && !output_room && !end_pending ? 1 : 0;
    if (c_.mode != kernel_mode::persistent && !(input_ready && output_room) && !end_pending) {
      if (stop == kernel_stop::drain && (!c_.has_input || c_.in.size() == 0))
        return c_.life.finish(kernel_state::stopped);
      return false;
    }
    return launch(stop);
  }

  void stop_requested(kernel_stop stop) noexcept override {
    if (ctl_ != nullptr) store_ctl(ctl_->stop, static_cast<std::uint32_t>(stop));
  }
  void yield() noexcept override {
    // Only over a plain run: a stop request the host made stays in force.
    std::uint32_t run = static_cast<std::uint32_t>(kernel_stop::run);
    if (ctl_ != nullptr) std::atomic_ref(ctl_->stop).compare_exchange_strong(run, stop_yield);
  }
  void take_over() noexcept override { last_tail_ = c_.in.load_tail(std::memory_order_acquire); }
  bool in_flight() const noexcept override { return in_flight_; }
  bool launch_returned() override {
    const auto status = running_.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
    if (in_flight_ && (status == CL_COMPLETE || status < 0)) launch_returned_now();
    return !in_flight_;
  }
  std::uint64_t uncounted() const noexcept override { return taken_ > counted_ ? taken_ - counted_ : 0; }
  std::uint32_t heartbeat() const noexcept override { return ctl_ != nullptr ? load_ctl(ctl_->heartbeat) : 0; }
  std::uint32_t room_wanted() const noexcept override { return room_wanted_; }
  std::chrono::microseconds idle_ceiling() const noexcept override {
    // A resident kernel needs the host only to watch it: a slow watch costs nothing.
    return std::chrono::microseconds(c_.mode == kernel_mode::persistent ? 20000 : 1000);
  }
  void release() noexcept override {
    relay_->cut();
    if (queue_()) clFinish(queue_());
    if (in_flight_) launch_returned_now();
    if (ctl_ != nullptr) clSVMFree(c_.dev.context()(), ctl_);
    ctl_ = nullptr;
    running_ = cl::Event();
    queue_ = cl::CommandQueue();
  }

private:
  // A launch moves the rings' counters on the device: the kernel publishes its results and gives
  // the input's slots back itself, so the host ends waiting on them must poll (no host push or
  // pop announces those moves) until the launch has returned.
  void launch_starts() noexcept {
    if (c_.has_output) c_.out.note_device_producer();
    if (c_.has_input) c_.in.note_device_consumer();
  }
  void launch_returned_now() noexcept {
    in_flight_ = false;
    if (c_.has_output) c_.out.note_device_producer_returned();
    if (c_.has_input) c_.in.note_device_consumer_returned();
  }
  bool launch(kernel_stop stop) {
    if (!c_.life.acquire_worker()) return false;
    launch_starts();
    store_ctl(ctl_->state, static_cast<std::uint32_t>(kernel_state::launched));
    store_ctl(ctl_->stop, static_cast<std::uint32_t>(stop));
    const auto local = c_.mode == kernel_mode::batched ? c_.image.batch_local_size() : c_.image.local_size();
    if (c_.mode == kernel_mode::batched) c_.life.hold_input_wakes();
    cl_call("clEnqueueNDRangeKernel", [&] {
      queue_.enqueueNDRangeKernel(c_.image.kernel(), cl::NullRange, cl::NDRange(local), cl::NDRange(local), nullptr,
                                  &running_);
      // A parked launch returns after its idle spin, often with work queued behind it by then:
      // the proxy hears of it at once instead of on its next poll, up to a millisecond later. Not
      // a batched one: relaunched at once, it would run over a few messages where the wait let a
      // batch gather (4 KiB messages through one kernel: 25-35% fewer a second). A batched one
      // wakes it only where pushes came while it ran, which would have woken it (input_wake_gate.hpp).
      if (c_.mode == kernel_mode::parked) wake_on_complete(running_, relay_);
      if (c_.mode == kernel_mode::batched) end_on_complete(running_, relay_);
      queue_.flush();
      return 0;
    });
    in_flight_ = true;
    c_.counters.launches.fetch_add(1, std::memory_order_relaxed);
    c_.counters.work_groups.fetch_add(1, std::memory_order_relaxed);
    heartbeat_stamp_ = clock::now();
    return true;
  }

  // Widens the kernel's 32-bit wrapping counters into 64-bit totals.
  void observe_counters() {
    // The state first: rp_end stores it with release after the kernel's last counts, so a
    // kernel seen ending is seen with all of them.
    const auto state = static_cast<kernel_state>(load_ctl(ctl_->state));
    const auto in_now = load_ctl(ctl_->msgs_in);
    const auto out_now = load_ctl(ctl_->msgs_out);
    c_.counters.msgs_in.fetch_add(in_now - last_in_, std::memory_order_relaxed);
    counted_ += in_now - last_in_; // this driver's own: spans (adaptive_driver) count theirs
    c_.counters.msgs_out.fetch_add(out_now - last_out_, std::memory_order_relaxed);
    last_in_ = in_now;
    last_out_ = out_now;
    const auto tail_now = c_.in.load_tail(std::memory_order_acquire); // the kernel's pops
    taken_ += tail_now - last_tail_;
    last_tail_ = tail_now;
    // How a launch ended is published by after_exit() once its event completed and the counters
    // were read for the last time: wait() takes a stopped kernel's counts as final (a stopped
    // state published here raced the last round's count).
    if (state == kernel_state::launched || state == kernel_state::running)
      c_.counters.state.store(state, std::memory_order_relaxed);
  }

  // A parked kernel holding a worker others wait for leaves after a short idle spell.
  void yield_when_contended() {
    if (c_.mode != kernel_mode::parked) return;
    const std::uint32_t budget = c_.dev.budget().contended() ? short_idle_budget : std::max(1u, c_.options.idle_budget);
    if (budget != idle_budget_now_) {
      store_ctl(ctl_->idle_budget, budget);
      idle_budget_now_ = budget;
    }
  }

  void watch_heartbeat() {
    const auto beat = load_ctl(ctl_->heartbeat);
    const auto now = clock::now();
    if (beat != last_heartbeat_) {
      last_heartbeat_ = beat;
      heartbeat_stamp_ = now;
      return;
    }
    if (now - heartbeat_stamp_ < c_.options.stall_timeout) return;
    const auto state = static_cast<kernel_state>(load_ctl(ctl_->state));
    const auto queued = c_.has_input ? c_.in.size() : 0u;
    std::string why =
        state == kernel_state::launched
            ? "was launched " + ms(now - heartbeat_stamp_) + " ago and has not started: every worker of pool '" +
                  c_.dev.budget().pool() + "' is busy"
            : "stalled: its heartbeat stayed at " + std::to_string(beat) + " for " + ms(now - heartbeat_stamp_) +
                  " while " + std::to_string(queued) + " messages waited in ring '" + c_.in.name() + "'";
    store_ctl(ctl_->stop, static_cast<std::uint32_t>(kernel_stop::now));
    c_.life.fail(std::make_exception_ptr(
        error(errc::stalled, "kernel '" + c_.image.name() + "' on device '" + c_.dev.name() + "' " + why)));
  }

  driver_context c_;
  cl::CommandQueue queue_;
  control_block* ctl_ = nullptr;
  cl::Event running_;
  std::shared_ptr<wake_relay> relay_;
  bool in_flight_ = false;
  std::uint32_t room_wanted_ = 0; // input queued, its output full: the launch waits for a pop
  std::uint32_t idle_budget_now_ = 0;
  std::uint32_t last_heartbeat_ = 0;
  clock::time_point heartbeat_stamp_;
  std::uint32_t last_in_ = 0, last_out_ = 0;
  std::uint32_t last_tail_ = 0;
  std::uint64_t taken_ = 0;   // widened input-ring pops
  std::uint64_t counted_ = 0; // widened counts of those the kernel reported
};

} // namespace

std::unique_ptr<kernel_driver> make_svm_driver(const driver_context& c) { return std::make_unique<svm_driver>(c); }

} // namespace ringpipe::detail
