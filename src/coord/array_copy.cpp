// One copy between two ends (host memory or device arrays), on the path choose_copy() gave:
//   shared  one memcpy by the host, which reaches both ends
//   device  one OpenCL command (read, write or copy buffer) on the transfer queue of a device end
//   staged  chunks through two pinned chunks: while one chunk is written out, the next is read in
//           (one command, as for `device`, where one end already lies in host memory)
// Steps after the first run on the runtime's threads, handed over by OpenCL event callbacks.
#include "../core/transfer_service.hpp"
#include "array_storage.hpp"

#include <algorithm>
#include <cstring>

namespace ringpipe::detail {
namespace {

class transfer_op : public std::enable_shared_from_this<transfer_op> {
public:
  transfer_op(runtime& rt, copy_end from, copy_end to, std::size_t bytes, copy_path path,
              std::shared_ptr<host_guard> guard, copy_completion done)
      : service_(rt.transfer_service()), from_(std::move(from)), to_(std::move(to)), bytes_(bytes), path_(path),
        guard_(std::move(guard)), done_(std::move(done)), began_(std::chrono::steady_clock::now()) {
    // A blocking call's host memory may be abandoned on a timeout: only the host touches it,
    // chunk by chunk under the guard, so no device command can write it later.
    const bool user_memory = from_.dev == nullptr || to_.dev == nullptr;
    if (guard_ && user_memory && path_ == copy_path::device) path_ = copy_path::staged;
  }

  void start() {
    service_->begin_copy();
    try {
      if (bytes_ == 0) return finish(nullptr);
      // A staged copy with one end already in host memory (shared memory of a CPU device, or an
      // asynchronous call's own memory) needs no stage of its own: one command moves the bytes.
      const bool one_end_in_host_memory = (from_.host != nullptr) != (to_.host != nullptr);
      const bool user_memory = from_.dev == nullptr || to_.dev == nullptr;
      if (path_ == copy_path::staged && ((guard_ && user_memory) || !one_end_in_host_memory)) return begin_staged();
      if (from_.host != nullptr && to_.host != nullptr) return copy_in_place();
      enqueue_one();
    } catch (...) {
      finish(named(std::current_exception()));
    }
  }

private:
  std::string what() const {
    return std::string(to_string(path_)) + " copy of " + std::to_string(bytes_) + " bytes from " + from_.what + " to " +
           to_.what;
  }

  /// The failure `e`, its message prefixed with this copy (the call that failed alone names neither end).
  std::exception_ptr named(std::exception_ptr e) const {
    try {
      std::rethrow_exception(e);
    } catch (const std::system_error& s) {
      return std::make_exception_ptr(error(s.code(), what() + ": " + s.what()));
    } catch (...) {
      return e;
    }
  }

  void finish(std::exception_ptr failed) {
    service_->count(from_.dev, to_.dev, path_, bytes_, std::chrono::steady_clock::now() - began_, failed != nullptr);
    service_->end_copy([&] { done_(failed); });
  }

  // ---- shared: one memcpy ----
  void copy_in_place() {
    const auto run = [self = shared_from_this()] {
      std::memcpy(self->to_.host, self->from_.host, self->bytes_);
      self->finish(nullptr);
    };
    // Large asynchronous copies run on the runtime's threads, not the caller's.
    if (!guard_ && bytes_ > transfer_service::chunk_bytes)
      service_->post(run);
    else
      run();
  }

  // ---- device: one OpenCL command ----
  void enqueue_one() {
    cl::Event done;
    if (to_.buffer == nullptr) { // buffer -> host-reached memory
      cl_call("clEnqueueReadBuffer", [&] {
        service_->queue(*from_.dev)
            .enqueueReadBuffer(buffer_of(from_), CL_FALSE, from_.offset, bytes_, to_.host, nullptr, &done);
      });
    } else if (from_.buffer == nullptr) { // host-reached memory -> buffer
      cl_call("clEnqueueWriteBuffer", [&] {
        service_->queue(*to_.dev).enqueueWriteBuffer(buffer_of(to_), CL_FALSE, to_.offset, bytes_, from_.host, nullptr,
                                                     &done);
      });
    } else { // two buffers of one context
      cl_call("clEnqueueCopyBuffer", [&] {
        service_->queue(*to_.dev).enqueueCopyBuffer(buffer_of(from_), buffer_of(to_), from_.offset, to_.offset, bytes_,
                                                    nullptr, &done);
      });
    }
    flush_queues();
    when_complete(done,
                  [](transfer_op& op, cl_int status) { op.finish(status < 0 ? op.command_failed(status) : nullptr); });
  }

  // ---- staged: two pinned chunks in flight ----
  enum class slot_state { idle, filling, full, draining };
  struct slot {
    std::shared_ptr<staging_chunk> chunk;
    std::size_t at = 0;
    std::size_t length = 0;
    slot_state state = slot_state::idle;
  };

  void begin_staged() {
    const device& pool_device = from_.buffer != nullptr ? *from_.dev
                                : to_.buffer != nullptr ? *to_.dev
                                : from_.dev != nullptr  ? *from_.dev
                                                        : *to_.dev;
    const std::size_t chunks = (bytes_ + transfer_service::chunk_bytes - 1) / transfer_service::chunk_bytes;
    for (std::size_t i = 0; i < std::min<std::size_t>(2, chunks); ++i)
      slots_[i].chunk = service_->borrow_chunk(pool_device);
    step();
  }

  /// Fills idle chunks and drains full ones until nothing more can start; finishes at the end.
  void step() {
    std::unique_lock lock(mutex_);
    // Another thread's step may have finished the copy between this one's wake-up and its lock.
    if (finished_) return;
    for (bool progress = true; progress && !failed_;) {
      progress = false;
      for (auto& s : slots_) {
        if (!s.chunk) continue;
        try {
          if (s.state == slot_state::idle && next_ < bytes_) {
            s.at = next_;
            s.length = std::min(transfer_service::chunk_bytes, bytes_ - next_);
            next_ += s.length;
            fill(s);
            progress = true;
          }
          if (s.state == slot_state::full) {
            drain(s);
            progress = true;
          }
        } catch (...) {
          failed_ = named(std::current_exception());
        }
      }
    }
    const bool busy = std::any_of(std::begin(slots_), std::end(slots_), [](const slot& s) {
      return s.state == slot_state::filling || s.state == slot_state::draining;
    });
    if (busy || finished_ || (!failed_ && drained_ < bytes_)) return;
    finished_ = true;
    auto failed = failed_;
    // The chunks go back to the pool now, under the lock every step reads them under.
    slots_[0].chunk.reset();
    slots_[1].chunk.reset();
    lock.unlock();
    finish(failed);
  }

  void fill(slot& s) {
    if (from_.host != nullptr) {
      host_copy(s.chunk->data(), from_.host + s.at, s.length);
      s.state = slot_state::full;
      return;
    }
    s.state = slot_state::filling;
    cl::Event done;
    cl_call("clEnqueueReadBuffer (staging)", [&] {
      service_->queue(*from_.dev)
          .enqueueReadBuffer(buffer_of(from_), CL_FALSE, from_.offset + s.at, s.length, s.chunk->data(), nullptr,
                             &done);
    });
    flush_queues();
    const auto index = static_cast<std::size_t>(&s - slots_);
    when_complete(done, [index](transfer_op& op, cl_int status) { op.chunk_moved(index, status, slot_state::full); });
  }

  void drain(slot& s) {
    if (to_.host != nullptr) {
      host_copy(to_.host + s.at, s.chunk->data(), s.length);
      s.state = slot_state::idle;
      drained_ += s.length;
      return;
    }
    s.state = slot_state::draining;
    cl::Event done;
    cl_call("clEnqueueWriteBuffer (staging)", [&] {
      service_->queue(*to_.dev).enqueueWriteBuffer(buffer_of(to_), CL_FALSE, to_.offset + s.at, s.length,
                                                   s.chunk->data(), nullptr, &done);
    });
    flush_queues();
    const auto index = static_cast<std::size_t>(&s - slots_);
    when_complete(done, [index](transfer_op& op, cl_int status) { op.chunk_moved(index, status, slot_state::idle); });
  }

  void chunk_moved(std::size_t index, cl_int status, slot_state next) {
    {
      const std::lock_guard lock(mutex_);
      auto& s = slots_[index];
      if (status < 0 && !failed_) failed_ = command_failed(status);
      if (next == slot_state::idle) drained_ += s.length;
      s.state = next;
    }
    step();
  }

  /// Copies host-side; under the guard, refused once a timed-out caller has abandoned its memory.
  void host_copy(std::byte* to, const std::byte* from, std::size_t n) {
    if (!guard_) {
      std::memcpy(to, from, n);
      return;
    }
    const std::lock_guard lock(guard_->mutex);
    if (guard_->abandoned) throw error(errc::cancelled, "abandoned by the caller after its timeout");
    std::memcpy(to, from, n);
  }

  // ---- helpers ----
  static cl::Buffer buffer_of(const copy_end& e) { return cl::Buffer(e.buffer, true); }

  void flush_queues() {
    // Commands start without waiting for a later blocking call: callbacks are what we wait on.
    for (const auto* d : {from_.dev, to_.dev})
      if (d != nullptr) service_->queue(*d).flush();
  }

  std::exception_ptr command_failed(cl_int status) const {
    return std::make_exception_ptr(error(std::error_code(status, opencl_category()),
                                         what() + ": the command failed with " + opencl_error_name(status)));
  }

  template <class F> void when_complete(const cl::Event& done, F next) {
    struct hand_over {
      std::shared_ptr<transfer_op> op;
      F next;
    };
    auto* user = new hand_over{shared_from_this(), next};
    const auto callback = [](cl_event, cl_int status, void* p) {
      std::unique_ptr<hand_over> h(static_cast<hand_over*>(p));
      auto op = std::move(h->op);
      auto then = h->next;
      op->service_->post([op, then, status] { then(*op, status); });
    };
    if (const cl_int e = clSetEventCallback(done(), CL_COMPLETE, callback, user); e != CL_SUCCESS) {
      delete user;
      throw_opencl_error(e, "clSetEventCallback (array copy)");
    }
  }

  std::shared_ptr<transfer_service> service_;
  copy_end from_, to_;
  std::size_t bytes_;
  copy_path path_;
  std::shared_ptr<host_guard> guard_;
  copy_completion done_;
  std::chrono::steady_clock::time_point began_;

  std::mutex mutex_; // staged state below
  slot slots_[2];
  std::size_t next_ = 0;    // first byte not yet given to a chunk
  std::size_t drained_ = 0; // bytes written out
  std::exception_ptr failed_;
  bool finished_ = false;
};

} // namespace

void start_transfer(runtime& rt, copy_end from, copy_end to, std::size_t bytes, copy_path path,
                    std::shared_ptr<host_guard> guard, copy_completion done) {
  std::make_shared<transfer_op>(rt, std::move(from), std::move(to), bytes, path, std::move(guard), std::move(done))
      ->start();
}

} // namespace ringpipe::detail
