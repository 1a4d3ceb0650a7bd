#pragma once
// The proxy of one ring kernel: its lifecycle on the runtime (start, stop, drain, stall, failure,
// reaping a failed launch), one poller, and one driver that knows the transport. Everything but
// the request functions runs on the proxy's strand.

#include "../actor/poller.hpp"
#include "../actor/strand_executor.hpp"
#include "../core/io_step.hpp"
#include "driver.hpp"
#include "image.hpp"
#include "input_wake_gate.hpp"

#include <ringpipe/occupancy.hpp>
#include <ringpipe/runtime.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace ringpipe::detail {

class kernel_proxy final : public kernel_lifecycle, public std::enable_shared_from_this<kernel_proxy> {
public:
  kernel_proxy(runtime& rt, const device& dev, kernel_spec spec, std::size_t in_bytes, std::size_t out_bytes,
               kernel_options options);
  ~kernel_proxy() { release_device_objects(); }

  // ---- caller's thread ----
  void set_arg(unsigned index, const void* value, std::size_t size) { image_->set_arg(index, value, size); }
  void check_args_set() const { image_->check_args_set(); }
  bool arg_unset(unsigned index) const { return image_->arg_unset(index); }
  void set_arg_svm(unsigned index, void* pointer) { image_->set_arg_svm(index, pointer); }
  void keep_alive(std::shared_ptr<const void> owner) { kept_alive_.push_back(std::move(owner)); }
  void on_exit(std::function<void(kernel_state, std::exception_ptr)> fn) { on_exit_.push_back(std::move(fn)); }
  /// Forces persistent mode for `why`; refused where the device cannot or another mode is forced.
  void require_resident(std::string_view why);
  void prefer_parked(bool leave_when_idle) noexcept {
    prefer_parked_ = true;
    leave_when_idle_ = leave_when_idle;
  }
  void set_launch_gate(std::shared_ptr<launch_gate> gate);
  void on_publish(std::function<void()> fn) { on_publish_ = std::move(fn); }
  /// Given up on (see ring_kernel_base::detach): its objects are leaked if the launch never returns.
  void detach() noexcept { detached_.store(true, std::memory_order_release); }
  bool detached() const noexcept { return detached_.load(std::memory_order_acquire); }
  void start(std::shared_ptr<ring_buffer> input, std::shared_ptr<ring_buffer> output);
  /// Any thread: raises the stop request (run < drain < now) and wakes the proxy.
  void request_stop(kernel_stop s);
  void wake() override {
    if (started_) poller_->wake();
  }
  /// A host push into an idle kernel's input (the proxy asked for it): an application thread
  /// steps a batched kernel's proxy itself, launching at once instead of waking an io thread to
  /// do it (a parked kernel's output is the application's to poll for: no gain there, measured).
  void input_pushed() {
    if (!started_) return;
    if (on_io_thread() || mode_ != kernel_mode::batched) {
      poller_->wake();
    } else {
      launched_by_push_.store(true, std::memory_order_relaxed); // its completion is offered (launch_completed)
      poller_->run_here();
    }
  }
  /// A thread waiting on the kernel's output took the offer of a completed launch
  /// (ring_buffer::offer_help): an application thread publishes it itself, instead of an io
  /// thread that would then wake it; a host function waiting on an io thread leaves it to the
  /// proxy's own thread, as a push there does.
  bool publish_here() {
    if (on_io_thread()) {
      poller_->wake();
      return false;
    }
    // The look after the publish runs here too: an idle kernel's proxy asks for the next push's
    // wake there, so that the application's next push launches (no io thread is woken for it).
    poller_->run_here(3);
    return true;
  }
  /// Any thread: new input is queued; wakes the proxy unless a running launch takes it itself.
  void input_arrived() {
    if (input_gate_.should_wake()) wake();
  }
  /// Waits until finished (or failed); true when it ended within the timeout.
  bool wait_finished(std::chrono::nanoseconds timeout);
  /// Waits until the kernel's last launch has returned and the proxy finished.
  bool wait_exited(std::chrono::nanoseconds timeout);
  /// Releases every OpenCL object; on the strand once the kernel has exited (see ~ring_kernel_base).
  void release_device_objects() noexcept;
  /// Releases them on the strand and waits; false if no runtime thread did so in time.
  bool release_on_strand(std::chrono::nanoseconds timeout);

  std::string describe() const;
  const std::string& name() const noexcept { return spec_.name; }
  const device& dev() const noexcept { return dev_; }
  runtime& owner() const noexcept { return rt_; }
  bool started() const noexcept { return started_; }
  kernel_mode mode() const noexcept { return mode_; }
  std::uint32_t local_size() const noexcept { return local_size_; }
  kernel_stats stats() const noexcept;
  kernel_state state() const noexcept { return counters_.state.load(); }
  std::exception_ptr failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }

  // ---- kernel_lifecycle (strand) ----
  kernel_stop stop_requested() const noexcept override { return stop_request_.load(std::memory_order_acquire); }
  bool acquire_worker() override;
  void release_worker() noexcept override { slot_.release(); }
  bool finish(kernel_state state) override;
  void fail(std::exception_ptr e) override;
  bool after_exit(kernel_state state, std::uint32_t code) override;
  bool leaving() const noexcept override { return finished_.load(std::memory_order_acquire) || reaping_; }
  void published() override {
    if (on_publish_) on_publish_();
  }
  void hold_input_wakes() noexcept override { input_gate_.hold(); }
  void release_input_wakes() noexcept override { input_gate_.release(); }
  void launch_completed() override {
    // Offered where the application's push launched an idle kernel (a sporadic message): in a
    // stream the io thread publishes and launches the next batch while the application consumes
    // (the 16-byte stream was 5-7% slower with the application's thread doing both).
    if (helped_ && launched_by_push_.exchange(false, std::memory_order_relaxed) && out_->offer_help()) return;
    wake();
  }
  void launch_ended() override {
    if (input_gate_.ended()) wake();
  }

private:
  poll_result step();
  bool ask_for_push_wake();
  bool promise_room();
  void check_ring(const std::shared_ptr<ring_buffer>& r, std::size_t bytes, const char* side) const;
  std::shared_ptr<ring_buffer> absent_ring(bool shared, const char* suffix) const;
  bool stream_ended();

  runtime& rt_;
  device dev_;
  kernel_spec spec_;
  kernel_options options_;
  std::size_t in_bytes_, out_bytes_;
  std::optional<kernel_image> image_;
  std::shared_ptr<strand_executor> executor_;
  std::optional<poller> poller_;
  std::unique_ptr<kernel_driver> driver_;
  std::shared_ptr<ring_buffer> in_, out_;
  std::vector<std::shared_ptr<const void>> kept_alive_; // memory the kernel's arguments point into
  bool has_input_ = false, has_output_ = false;
  bool started_ = false;
  // Batched, with an output: an application thread waiting on it may step. Read by completion
  // callbacks; cleared before the output ring is let go.
  std::atomic<bool> helped_{false};
  std::atomic<bool> launched_by_push_{false}; // an application's push stepped the idle proxy
  bool prefer_parked_ = false, leave_when_idle_ = false;
  kernel_mode mode_ = kernel_mode::batched;
  std::uint32_t local_size_ = 1; // the image's round group, kept after the image is released

  // strand only
  occupancy::slot first_slot_; // taken in start(): a kernel that could never run is refused there
  occupancy::slot slot_;
  bool reaping_ = false; // failed while a launch runs: waiting for it to return

  // shared with other threads
  kernel_counters counters_;
  std::atomic<kernel_stop> stop_request_{kernel_stop::run};
  std::atomic<bool> finished_{false};
  input_wake_gate input_gate_;
  std::atomic<bool> detached_{false};
  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::exception_ptr failure_;
  // May run twice for a failed launch (see fail()); never under mutex_.
  std::vector<std::function<void(kernel_state, std::exception_ptr)>> on_exit_;
  void exited() {
    for (auto& fn : on_exit_)
      fn(counters_.state.load(), failure());
  }
  std::function<void()> on_publish_;
  std::shared_ptr<launch_gate> gate_;
};

} // namespace ringpipe::detail
