#pragma once
// A host stage on the runtime (private to the library): pops from its input rings (merging them,
// each in order), applies its function, pushes to its output rings (broadcast or round robin),
// and closes its outputs once every input has ended. It runs on its own strand and polls with
// adaptive backoff: it never pops a message it has no room to push (credit-based backpressure),
// and an idle actor sleeps on a timer.

#include <ringpipe/kernel.hpp>
#include <ringpipe/metrics.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/ring.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ringpipe::detail {

struct host_actor : std::enable_shared_from_this<host_actor> {
  using generate_fn = std::function<bool(std::byte* out)>;
  using transform_fn = std::function<bool(const std::byte* in, std::byte* out)>;
  using consume_fn = std::function<void(const std::byte* in)>;

  struct input {
    std::shared_ptr<ring_buffer> ring;
    std::atomic<std::uint64_t> popped{0};
  };
  struct output {
    std::shared_ptr<ring_buffer> ring;
    ring_kernel_base* consumer = nullptr; ///< woken after pushes (parked and batched kernels)
  };

  host_actor(boost::asio::io_context& io, std::string name, stage_kind kind, std::uint32_t batch);

  // Set-up, before start().
  void add_input(std::shared_ptr<ring_buffer> r);
  void add_output(std::shared_ptr<ring_buffer> r, ring_kernel_base* consumer);
  std::string name;
  stage_kind kind;
  fan_out policy = fan_out::broadcast;
  generate_fn generate;   ///< sources
  transform_fn transform; ///< host stages; movers have none and copy
  consume_fn consume;     ///< sinks
  std::function<void(std::exception_ptr)> on_failure;

  void start();
  /// Stops at the next turn. Thread-safe.
  void stop() noexcept;
  /// Waits until the actor has left its loop (finished, failed or stopped).
  bool wait_exited(std::chrono::nanoseconds timeout) const;

  // Observed from other threads.
  std::atomic<std::uint64_t> msgs_in{0}, msgs_out{0}, batches{0}, busy_ns{0};
  std::atomic<bool> finished{false}; ///< every input ended (or the source did) and outputs closed
  std::atomic<bool> failed{false};
  std::atomic<bool> exited{false};
  std::vector<std::unique_ptr<input>> inputs;
  std::vector<output> outputs;
  std::uint32_t queued() const;

private:
  void tick();
  void schedule(bool progress);
  std::size_t turn();
  std::size_t move_each();
  bool has_room();
  void push(const std::byte* message);
  void end_stream();
  void leave();

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  std::uint32_t batch_;
  std::size_t in_size_ = 0, out_size_ = 0;
  std::vector<std::byte> in_buf_, out_buf_;
  std::vector<std::byte> staging_; // copies: a block of messages in host memory
  std::size_t next_in_ = 0, next_out_ = 0;
  std::chrono::steady_clock::time_point last_progress_;
  std::chrono::microseconds idle_delay_{0};
  std::atomic<bool> stop_{false};
};

} // namespace ringpipe::detail
