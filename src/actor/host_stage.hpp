#pragma once
// A host stage on the runtime: an actor that takes from its input rings (merged, each in order),
// does its work, and hands out to its output rings (a fan-out policy), polled by one poller. It
// never pops a message it has no room to push (credit-based backpressure) and closes its outputs
// once every input has ended. What it does with a message is its subclass (stages.hpp): a
// source, a transform, a sink or a mover.

#include "fan.hpp"
#include "poller.hpp"

#include <ringpipe/detail/host_function.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringpipe::detail {

class host_stage : public std::enable_shared_from_this<host_stage> {
public:
  host_stage(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch);
  virtual ~host_stage() = default;
  host_stage(const host_stage&) = delete;
  host_stage& operator=(const host_stage&) = delete;

  // ---- set-up, before start() ----
  void add_input(std::shared_ptr<ring_buffer> r);
  /// `wake_consumer` (may be empty) runs after every turn that pushed.
  void add_output(std::shared_ptr<ring_buffer> r, std::function<void()> wake_consumer = {});
  void set_fan(fan_policy policy) { fan_ = policy; }
  /// Called once, on the stage's executor, when its work throws.
  std::function<void(std::exception_ptr)> on_failure;
  /// Called once, on the stage's executor, when it leaves its loop (finished, failed, stopped).
  std::function<void()> on_exit;

  void start();
  /// Stops at the next step. Any thread.
  void stop() noexcept;
  /// Any thread: step soon (a neighbour moved messages), unless it sleeps until its paced turn
  /// and no input has closed (the end of a stream is not paced).
  void wake();
  /// Any thread: a kernel published a batch beside this stage: it took messages from `r`, one of
  /// this stage's outputs (`feeds_kernel`), or put messages into `r`, one of its inputs. As
  /// wake(), but out of a paced sleep too where `r` is left a quarter full or less (of its
  /// fill_limit; or a quarter free or less): at its paced turn the kernel would have run dry (or
  /// filled the ring) first.
  void kernel_published(const ring_buffer& r, bool feeds_kernel);
  /// How full this stage fills `r`, one of its outputs, at most: the ring's capacity, or less
  /// where a stage feeds it only so far (a farm's dealer). Any thread.
  virtual std::uint32_t fill_limit(const ring_buffer& r) const noexcept { return r.capacity(); }
  /// Before start(): back off at once after progress instead of re-polling for a spin window
  /// (where the pipeline's threads outnumber the cores, the spin takes a core a kernel needs), and
  /// pace the sleeps so that a turn finds about a quarter of its smallest ring or of its batch.
  void poll_for_throughput() noexcept {
    poller_.set_spin_window(std::chrono::microseconds(0));
    paced_ = true;
  }
  /// How long it re-polls at once after progress (0: it backs off at once).
  std::chrono::microseconds spin_window() const noexcept { return poller_.timing().spin_window; }
  /// The messages its sleeps are paced to find at a turn (0: not paced). After start().
  std::uint32_t pace() const noexcept { return poller_.pace(); }
  /// Waits until the stage has left its loop (finished, failed or stopped).
  bool wait_exited(std::chrono::nanoseconds timeout) const;
  /// Whether the calling thread is in this stage's host function (it called the caller).
  bool in_function_on_this_thread() const noexcept;
  /// What a stop called from inside this stage's function finds of its run: `taken` messages
  /// given to the function still in `window`'s slots (taken when the function returns), `made`
  /// results not yet pushed (pushed then). Marks the run stopped inside (run_progress). Only on
  /// the thread in its turn (in_function_on_this_thread); nothing where no run is in progress.
  struct run_at_stop {
    const ring_buffer* window = nullptr;
    std::uint64_t taken = 0, made = 0;
  };
  run_at_stop stop_inside_turn() noexcept;

  const std::string& name() const noexcept { return name_; }
  const std::vector<std::unique_ptr<stage_input>>& inputs() const noexcept { return inputs_.all(); }
  std::uint32_t queued() const { return inputs_.queued(); }
  /// Messages taken from the inputs and kept outside any ring (a farm's queues): counted as
  /// undelivered when the pipeline stops.
  virtual std::uint64_t held() const noexcept { return 0; }
  /// Whether a turn that finds its inputs empty has nothing else to wait for (it holds nothing
  /// between turns): idle a while, it may then sleep until a push into an input wakes it.
  virtual bool sleeps_until_input() const noexcept { return true; }

  // Observed from other threads.
  std::atomic<std::uint64_t> msgs_in{0}, msgs_out{0}, batches{0}, busy_ns{0};
  /// Messages taken and never passed on because the stage's function threw on them.
  std::atomic<std::uint64_t> lost{0};
  std::atomic<bool> finished{false}; ///< every input ended (or the source did) and outputs closed
  std::atomic<bool> failed{false};
  std::atomic<bool> exited{false};

protected:
  /// While a host function runs over `p` (read in place from the last in_run where `from_window`):
  /// what stop_inside_turn() reads. On the stage's thread only.
  class watched_run {
  public:
    watched_run(host_stage& s, run_progress& p, bool from_window) noexcept;
    ~watched_run();
    watched_run(const watched_run&) = delete;
    watched_run& operator=(const watched_run&) = delete;

  private:
    host_stage& s_;
    const host_stage* outer_; // the stage whose function this thread was in before (none)
  };
  /// One turn: up to batch() messages. Returns how many were taken (or generated).
  virtual std::size_t turn() = 0;
  /// Paced (poll_for_throughput): sets the pace from the rings and fill limits; at start(), and
  /// from a turn after a fill limit changed.
  void pace_by_rings();
  /// Pops, hands each message to `handle(message, fan)` and counts, while outputs have room.
  template <class Handle> std::size_t each_message(Handle&& handle);
  void push(auto& fan, const std::byte* message) {
    fan.push(outputs_, message);
    msgs_out.fetch_add(1, std::memory_order_relaxed);
  }
  /// Whether messages can move in runs: every output gets every message (one output, or
  /// broadcast). Round-robin over several outputs goes message by message.
  bool runs_possible() const noexcept { return outputs_.size() <= 1 || std::holds_alternative<broadcast>(fan_); }
  /// Where a run of results goes, and how many fit (at most `max` and the batch): with one output,
  /// its ring's free slots, filled in place; with several (broadcast), a block that push_run
  /// copies to each.
  struct run_space {
    std::byte* data = nullptr;
    std::size_t room = 0;
  };
  run_space out_run(std::size_t max);
  /// Up to `max` messages (and the batch) queued in one input, read in place without taking
  /// them; take_run(k) takes the first k (counted in msgs_in): a function that throws mid-run
  /// loses only what it held.
  std::span<const std::byte> in_run(std::size_t max) { return inputs_.read_run(std::min<std::size_t>(max, batch_)); }
  void take_run(std::size_t n) {
    inputs_.take_run(n);
    msgs_in.fetch_add(n, std::memory_order_relaxed);
  }
  /// Publishes the first `n` messages of the last out_run (counted in msgs_out).
  void push_run(std::size_t n);
  /// After a host function threw mid-run: takes the run up to and including the messages it was
  /// given at once (one, or its whole batch) and counts those as lost.
  void lose_at_throw(const run_progress& p);
  /// Closes every output: the stream ended.
  void end_stream();
  std::uint32_t batch() const noexcept { return batch_; }
  /// The time on the stage's executor (a test's executor moves it by hand).
  poll_executor::clock::time_point now() const { return poller_.executor().now(); }
  std::size_t in_size() const noexcept { return in_size_; }
  std::size_t out_size() const noexcept { return out_size_; }

  merge_inputs inputs_;
  std::vector<stage_output> outputs_;
  fan_policy fan_;
  std::vector<std::byte> in_buf_, out_buf_;
  std::vector<std::byte> out_block_; // a batch of results for several outputs

private:
  poll_result step();
  /// After a turn that moved nothing, idle a while: whether it may sleep until a push into an
  /// input or a pop from a full output wakes it (each promised).
  bool may_sleep();
  void leave();

  std::string name_;
  std::uint32_t batch_;
  std::size_t in_size_ = 0, out_size_ = 0;
  poller poller_;
  std::atomic<bool> stop_{false};
  bool paced_ = false;
  mutable std::mutex mutex_;
  mutable std::condition_variable exited_cv_;
  run_progress* run_ = nullptr; // the run a host function is in (watched_run; its thread only)
  bool run_from_window_ = false;
};

template <class Handle> std::size_t host_stage::each_message(Handle&& handle) {
  return std::visit(
      [&](auto& fan) {
        std::size_t moved = 0;
        while (moved < batch_ && !stop_.load(std::memory_order_acquire) && fan.has_room(outputs_) &&
               inputs_.pop(in_buf_.data())) {
          msgs_in.fetch_add(1, std::memory_order_relaxed);
          ++moved;
          try {
            handle(in_buf_.data(), fan);
          } catch (...) {
            lost.fetch_add(1, std::memory_order_relaxed);
            throw;
          }
        }
        return moved;
      },
      fan_);
}

} // namespace ringpipe::detail
