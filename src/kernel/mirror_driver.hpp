#pragma once
// The mirrored driver: for devices that cannot reach the kernel's rings (no fine-grained SVM, or
// rings in host memory), each batch is copied into device mirrors of the rings, the kernel runs
// over it once, and its results are copied back. A batch is one chain over three queues (upload:
// headers and input; compute: the control block's host words, the kernel, the control block's
// read-back; download: headers and results) that the driver polls, so a runtime thread never
// blocks on the device (a completed chain wakes the proxy) and a batch that does not return is
// reported as stalled. Map kernels get two lanes: the next batch uploads while the current one
// runs. Lanes complete in launch order.
// A map kernel with a span form (span.clh) runs each batch as a span: one work-item per message
// over as many work-groups as the batch needs (a ring kernel's one group would use one compute
// unit of a GPU's hundred), with no ring headers or control block to copy: the chain is the
// batch up, the launch, the keep flags and results down, and the host publishes in order.
// On a CPU device the copies go straight between the rings' slots and the mirrors (ring copies):
// pinned staging gains nothing without DMA, and each batch crosses in two passes instead of four.

#include "driver.hpp"
#include "image.hpp"
#include "launch_wake.hpp"

#include "../core/pinned_memory.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

namespace ringpipe::detail {

// One batch in flight: its mirrors, staging, and the host memory its commands read and write
// (untouched until `done` completes).
struct mirror_lane {
  cl::Buffer in_mirror, out_mirror, keep_mirror; // keep: spans' flags, 0 where a message was dropped
  pinned_memory in_staging, out_staging, keep_staging;
  std::uint32_t n = 0;         // messages in the batch
  std::uint32_t room = 0;      // results it may produce
  std::uint32_t tail = 0;      // input ring counter of its first message
  std::uint32_t out_start = 0; // mirror counter of its first result
  std::uint32_t out_at = 0;    // output ring counter its results land at (ring copies), the next lane's after
  bool ends_stream = false;
  std::uint32_t stop_word = 0, state_word = 0;
  ring_header in_header{}, out_header{};
  control_block ctl{}; // read back after the launch
  cl::Event done;      // the chain's last command
};

class mirror_driver final : public kernel_driver {
public:
  explicit mirror_driver(const driver_context& c);
  ~mirror_driver() override { release(); }

  bool step() override {
    bool progress = false;
    if (in_flight_lanes_ > 0) {
      mirror_lane& oldest = lanes_[front_];
      const auto status = oldest.done.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
      if (status < 0) throw_opencl_error(status, "batched launch");
      if (status != CL_COMPLETE) {
        if (watch_batch(oldest)) return false;
        return in_flight_lanes_ < lane_count_ && launch_batch();
      }
      front_ = (front_ + 1) % lane_count_;
      --in_flight_lanes_;
      c_.life.release_input_wakes(); // a lane is free: pushes may launch a batch
      heartbeat_stamp_ = std::chrono::steady_clock::now();
      progress = complete_batch(oldest);
      if (c_.life.leaving()) return false;
    }
    while (in_flight_lanes_ < lane_count_ && launch_batch())
      progress = true;
    return progress;
  }

  // The control block is a device buffer: a stop reaches the kernel with its next batch.
  void stop_requested(kernel_stop) noexcept override {}
  bool in_flight() const noexcept override { return in_flight_lanes_ > 0; }
  bool completion_wakes() const noexcept override { return in_flight_lanes_ == lane_count_; }
  std::uint32_t room_wanted() const noexcept override { return room_wanted_; }
  std::uint64_t uncounted() const noexcept override { return uncounted_; }
  bool launch_returned() override {
    const auto status = running_.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
    if (status == CL_COMPLETE || status < 0) in_flight_lanes_ = 0;
    return in_flight_lanes_ == 0;
  }
  void release() noexcept override {
    relay_->cut();
    if (queue_()) {
      // A lane's commands may still read or write its staging memory until they complete.
      for (auto* q : {&upload_, &queue_, &download_})
        clFinish((*q)());
      for (auto& l : lanes_) {
        l.in_staging.unmap(queue_);
        l.out_staging.unmap(queue_);
        l.keep_staging.unmap(queue_);
      }
      clFinish(queue_());
    }
    lanes_ = {};
    running_ = cl::Event();
    ctl_ = cl::Buffer();
    upload_ = download_ = queue_ = cl::CommandQueue();
  }

private:
  static std::uint32_t batch_capacity(const driver_context& c, bool spans, unsigned lanes);
  bool launch_batch();
  bool complete_batch(mirror_lane& l);
  bool complete_span(mirror_lane& l);
  bool watch_batch(const mirror_lane& l);
  void enqueue_chain(mirror_lane& l);
  void enqueue_span(mirror_lane& l);
  void write_span_header(mirror_lane& l);
  bool gate_open();
  // Where batches cross (mirror_copies.cpp): the lane's staging or, with ring copies, ring slots.
  void upload_messages(mirror_lane& l, std::size_t at, cl::Event* done);
  void download_results(mirror_lane& l, const cl::Buffer& mirror, std::size_t at, std::uint32_t count, cl::Event* done);
  std::byte* landed(const mirror_lane& l, std::uint32_t i) const noexcept;
  std::byte* front(const mirror_lane& l, std::uint32_t k) const noexcept;
  void push_results(const mirror_lane& l, std::uint32_t count);

  driver_context c_;
  bool spans_ = false;                         // batches run as the kernel's span form
  bool ring_copies_ = false;                   // a CPU device: no staging, copies use ring slots
  cl::CommandQueue queue_, upload_, download_; // compute; batches in; results out
  cl::Buffer ctl_;                             // the control block, in device memory
  std::uint32_t mirror_capacity_ = 0;
  std::array<mirror_lane, 2> lanes_;
  unsigned lane_count_ = 1; // 2: double-buffered
  unsigned front_ = 0;      // the oldest lane in flight
  unsigned in_flight_lanes_ = 0;
  std::uint32_t room_wanted_ = 0; // the last launch_batch found no room for its results
  cl::Event running_;             // the last lane's chain completes last
  std::uint64_t mirrored_in_ = 0, mirrored_out_ = 0;
  std::uint64_t returned_batches_ = 0;
  std::uint64_t uncounted_ = 0;       // taken from a batch but not counted by the kernel
  std::uint32_t counted_so_far_ = 0;  // the kernel's own msgs_in (control block) after the last batch
  std::uint32_t arrivals_so_far_ = 0; // its barrier arrivals (control block) after the last batch
  std::chrono::steady_clock::time_point heartbeat_stamp_;
  std::shared_ptr<wake_relay> relay_; // wakes the proxy when a lane's chain completes
};

} // namespace ringpipe::detail
