#pragma once
// What every array copy of one runtime shares: a transfer queue per device (so copies never wait
// behind a kernel's launches), a pool of pinned staging chunks per context (allocated once, reused
// by every staged copy), and the counters behind runtime::transfers().

#include "pinned_memory.hpp"

#include <ringpipe/topology.hpp>
#include <ringpipe/transfer.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace ringpipe::detail {

/// Pinned chunks of one context, reused: allocating and mapping one costs far more than a copy.
struct staging_pool {
  cl::Context context;
  cl::CommandQueue map_queue;
  std::mutex mutex;
  std::vector<pinned_memory> free;
  ~staging_pool();
};

/// A pinned chunk lent by a pool; given back when it is destroyed.
class staging_chunk;

class transfer_service {
public:
  /// Bytes of one staging chunk: large enough that a copy's fixed cost is small, small enough that
  /// two per copy in flight stay cheap.
  static constexpr std::size_t chunk_bytes = std::size_t{1} << 20;

  transfer_service(const topology& devices, boost::asio::io_context::executor_type executor);
  ~transfer_service();
  transfer_service(const transfer_service&) = delete;
  transfer_service& operator=(const transfer_service&) = delete;

  /// The in-order queue array copies on `dev` use (created on first use; thread-safe).
  cl::CommandQueue& queue(const device& dev);
  /// A pinned chunk of chunk_bytes in `dev`'s context.
  std::shared_ptr<staging_chunk> borrow_chunk(const device& dev);

  /// Counts one finished copy.
  void count(const device* from, const device* to, copy_path path, std::uint64_t bytes,
             std::chrono::steady_clock::duration took, bool failed);
  transfer_report report() const;

  /// A copy in flight holds the service open (copies keep a shared_ptr to it). The runtime drains
  /// them, up to `limit`, before it stops the threads their completions are posted to, then closes
  /// the service: a copy that ends later drops its completion instead of posting to a stopped
  /// runtime. begin_copy throws errc::cancelled once closed. parallel_for counts its commands in
  /// flight here too, so that the runtime waits for them as well.
  void begin_copy();
  /// Runs `deliver` (which posts the copy's completion) unless the service is closed.
  void end_copy(const std::function<void()>& deliver);
  /// Posts `step` to the runtime's threads unless the service is closed (an OpenCL callback hands
  /// a copy's next step over this way).
  void post(std::function<void()> step);
  /// Waits for the copies in flight, then closes; false if some had not ended by `limit`.
  bool drain_and_close(std::chrono::milliseconds limit);

private:
  boost::asio::io_context::executor_type executor_;
  mutable std::mutex mutex_;
  std::vector<std::optional<cl::CommandQueue>> queues_;
  std::map<cl_context, std::shared_ptr<staging_pool>> pools_;
  std::condition_variable idle_;
  std::size_t in_flight_ = 0;
  bool closed_ = false;
  std::map<std::tuple<std::ptrdiff_t, std::ptrdiff_t, copy_path>, std::size_t> row_of_;
  transfer_report report_;
};

class staging_chunk {
public:
  std::byte* data() const noexcept { return memory_.data(); }
  ~staging_chunk();
  staging_chunk(const staging_chunk&) = delete;
  staging_chunk& operator=(const staging_chunk&) = delete;

private:
  friend class transfer_service;
  staging_chunk(std::shared_ptr<staging_pool> pool, pinned_memory memory) : pool_(std::move(pool)), memory_(memory) {}
  std::shared_ptr<staging_pool> pool_;
  pinned_memory memory_;
};

} // namespace ringpipe::detail
