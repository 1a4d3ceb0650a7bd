// The adaptive driver: a resident map kernel (persistent or parked, its mode not forced, over
// rings wide enough for spans) that falls behind its input (a queue that would take it over 2 ms)
// while its output has room hands the stream to spans (span_driver.cpp), which use every compute
// unit, and takes it back once the backlog is gone.
// The round trip stays the resident kernel's; the rate under load is the spans'. One side runs
// at a time, and the switch waits until that side has published everything (the resident
// launch returned, no span in flight), so the rings pass from one to the other in order.

#include "driver.hpp"

#include <chrono>

namespace ringpipe::detail {
namespace {

using clock = std::chrono::steady_clock;

// Consecutive watches that find the resident kernel behind before it is asked to yield (one
// reading may be a burst it is about to drain), a millisecond or more apart.
constexpr unsigned behind_watches = 2;
constexpr auto watch_interval = std::chrono::milliseconds(1);
// Behind: its queue holds more than it took in this long at its rate since the last watch.
constexpr auto behind_horizon = std::chrono::milliseconds(2);

class adaptive_driver final : public kernel_driver {
public:
  explicit adaptive_driver(const driver_context& c)
      : c_(c), resident_(make_svm_driver(c)), spans_(make_span_driver(c)), backlog_gone_(c.image.batch_local_size()) {}
  ~adaptive_driver() override { release(); }

  bool step() override {
    if (spanning_) {
      const bool progress = spans_->step();
      if (c_.life.leaving() || spans_->in_flight() || c_.in.size() >= backlog_gone_) return progress;
      spanning_ = false; // the backlog is gone: the resident kernel takes the stream back
      resident_->take_over();
      return true;
    }
    if (yielded_ && !resident_->in_flight()) { // the yielded launch returned: spans take over
      yielded_ = false;
      spanning_ = true;
      c_.counters.handovers.fetch_add(1, std::memory_order_relaxed);
      spans_->take_over();
      spans_->step();
      return true;
    }
    const bool progress = resident_->step();
    if (c_.life.leaving() || !resident_->in_flight() || yielded_) return progress;
    const auto now = clock::now();
    if (now - last_watch_ < watch_interval) return progress;
    // Behind: its queue would take it longer than behind_horizon at the rate it has kept (a costly
    // kernel: a few thousand items; a cheap one drains a full ring in less), while its output has
    // room. An output half full too means its consumer is the limit, and spans would only take the
    // workers (a CPU device's host threads) that the consumer and the producer run on.
    const auto taken = c_.counters.msgs_in.load(std::memory_order_relaxed);
    const double rate =
        static_cast<double>(taken - last_taken_) / std::chrono::duration<double>(now - last_watch_).count();
    last_watch_ = now;
    last_taken_ = taken;
    const std::uint32_t queued = c_.in.size();
    const bool behind = queued >= backlog_gone_ &&
                        queued > rate * std::chrono::duration<double>(behind_horizon).count() &&
                        c_.out.size() < c_.out.capacity() / 2;
    behind_ = behind ? behind_ + 1 : 0;
    if (behind_ >= behind_watches) {
      behind_ = 0;
      yielded_ = true;
      resident_->yield();
    }
    return progress;
  }

  void stop_requested(kernel_stop stop) noexcept override {
    resident_->stop_requested(stop);
    spans_->stop_requested(stop);
  }
  bool in_flight() const noexcept override { return resident_->in_flight() || spans_->in_flight(); }
  bool launch_returned() override {
    const bool resident = resident_->launch_returned();
    const bool spans = spans_->launch_returned();
    return resident && spans;
  }
  std::uint64_t uncounted() const noexcept override { return resident_->uncounted() + spans_->uncounted(); }
  std::uint32_t room_wanted() const noexcept override {
    return spanning_ ? spans_->room_wanted() : resident_->room_wanted();
  }
  std::uint32_t heartbeat() const noexcept override { return resident_->heartbeat(); }
  std::chrono::microseconds idle_ceiling() const noexcept override {
    // Resident: watch for a backlog within a millisecond or two; spans: publish promptly.
    return spanning_ ? spans_->idle_ceiling() : std::chrono::microseconds(1000);
  }
  void release() noexcept override {
    resident_->release();
    spans_->release();
  }

private:
  driver_context c_;
  std::unique_ptr<kernel_driver> resident_, spans_;
  std::uint32_t backlog_gone_; // fewer queued messages than this: back to the resident kernel
  bool spanning_ = false;
  bool yielded_ = false; // the resident launch was asked to return
  unsigned behind_ = 0;
  clock::time_point last_watch_ = clock::now();
  std::uint64_t last_taken_ = 0;
};

} // namespace

std::unique_ptr<kernel_driver> make_adaptive_driver(const driver_context& c) {
  return std::make_unique<adaptive_driver>(c);
}

} // namespace ringpipe::detail
