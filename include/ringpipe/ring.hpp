#pragma once
// Rings: bounded single-producer/single-consumer queues of fixed-size slots, laid out the same in
// C++ and in OpenCL C (cl/ringpipe/ring.clh). The host side of either end is ring<T>; kernels
// reach the same memory through fine-grained SVM where the device has it.

#include <ringpipe/error.hpp>
#include <ringpipe/ring_buffer.hpp>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>

namespace ringpipe {

/// A typed ring of trivially copyable messages. Cheap to copy: copies share the ring.
template <class T> class ring {
  static_assert(std::is_trivially_copyable_v<T>, "ring messages are copied as bytes");

public:
  using value_type = T;
  explicit ring(std::uint32_t capacity, const ring_options& options = {})
      : buffer_(std::make_shared<ring_buffer>(capacity, sizeof(T), options)) {}
  ring(const device& dev, std::uint32_t capacity, const ring_options& options = {})
      : buffer_(std::make_shared<ring_buffer>(dev, capacity, sizeof(T), options)) {}
  /// A typed view of an existing ring; throws errc::message_size if its slots are not sizeof(T).
  explicit ring(std::shared_ptr<ring_buffer> buffer) : buffer_(std::move(buffer)) {
    if (!buffer_ || buffer_->slot_size() != sizeof(T))
      throw error(errc::message_size, "ring '" + (buffer_ ? buffer_->name() : std::string("(none)")) + "' has " +
                                          std::to_string(buffer_ ? buffer_->slot_size() : 0) + "-byte slots, not the " +
                                          std::to_string(sizeof(T)) + " bytes of this type");
  }

  // --- producer side ---
  [[nodiscard]] bool try_push(const T& m) noexcept {
    std::byte* slot = buffer_->next_push_slot();
    if (slot == nullptr) return false;
    std::memcpy(slot, &m, sizeof(T));
    buffer_->commit_push(1);
    return true;
  }
  std::size_t push_n(std::span<const T> ms) noexcept { return buffer_->push_n_bytes(ms.data(), ms.size()); }
  /// Blocks while the ring is full; throws errc::timeout naming the ring after `timeout`, and
  /// errc::closed once the ring was closed (try_push, push_n and write_window move nothing then).
  void push(const T& m, std::chrono::nanoseconds timeout) {
    if (!buffer_->cancelled() && try_push(m)) return;
    push_waiting(m, timeout);
  }
  /// As push(), but reports a timeout or a close through `ec` (and returns false) instead of throwing.
  bool push(const T& m, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept {
    ec.clear();
    if (!buffer_->cancelled() && try_push(m)) return true;
    return push_waiting(m, timeout, ec);
  }
  /// Pushes every message, in runs, waiting while the ring is full (spinning briefly, then
  /// yielding and sleeping, so a waiting producer leaves its core to the kernels it feeds; a host
  /// pop wakes the sleep, and a long one sleeps on the ring's promise of it: promise_pop_wake).
  /// Returns how many were pushed: all of them, or fewer with `ec` set to errc::timeout,
  /// errc::cancelled or errc::closed.
  std::size_t push_all(std::span<const T> ms, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept;
  /// Up to `max` free slots after the head that lie in one piece (fewer at the end of the slot
  /// array, none when the ring is full or closed), to be written in place; commit_push(n) then publishes the
  /// first n. Saves push_n's copy: messages are made where the consumer reads them.
  std::span<T> write_window(std::size_t max) noexcept { return typed<T>(buffer_->write_window(max)); }
  void commit_push(std::size_t n) noexcept { buffer_->commit_push(n); }
  void close() noexcept { buffer_->close(); }

  // --- consumer side ---
  // The calls that never wait (try_pop, pop_n, read_window) yield the core now and then while
  // they find the ring empty (ring_buffer::note_empty_look): a loop of them must not starve a
  // device worker queued on its core. pop() and pop_some() back off by themselves and count none.
  [[nodiscard]] bool try_pop(T& m) noexcept {
    if (take_one(m)) return true;
    buffer_->note_empty_look();
    return false;
  }
  std::size_t pop_n(std::span<T> ms) noexcept {
    const std::size_t n = buffer_->pop_n_bytes(ms.data(), ms.size());
    if (n == 0 && !ms.empty()) buffer_->note_empty_look();
    return n;
  }
  /// Blocks until a message arrives (true) or the stream ends (false); throws errc::timeout
  /// naming the ring after `timeout`.
  bool pop(T& m, std::chrono::nanoseconds timeout) {
    if (!buffer_->cancelled() && take_one(m)) return true;
    return pop_waiting(m, timeout);
  }
  /// As pop(), but a timeout sets `ec` and returns false.
  bool pop(T& m, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept {
    ec.clear();
    if (!buffer_->cancelled() && take_one(m)) return true;
    return pop_waiting(m, timeout, ec);
  }
  /// Waits as push_all() does until at least one message is there, then pops up to ms.size().
  /// Returns 0 at the end of the stream, or with `ec` set to errc::timeout or errc::cancelled.
  std::size_t pop_some(std::span<T> ms, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept;
  /// Up to `max` queued messages from the tail that lie in one piece, to be read in place: they
  /// stay valid until drop_n(k) gives the first k slots back. Saves pop_n's copy.
  std::span<const T> read_window(std::size_t max) noexcept {
    const auto run = typed<const T>(buffer_->read_window(max));
    if (run.empty() && max != 0) buffer_->note_empty_look();
    return run;
  }
  void drop_n(std::size_t n) noexcept { buffer_->drop_n(n); }
  bool drained() noexcept { return buffer_->drained(); }

  std::uint32_t size() const noexcept { return buffer_->size(); }
  std::uint32_t capacity() const noexcept { return buffer_->capacity(); }
  bool closed() const noexcept { return buffer_->closed(); }
  std::uint32_t high_water() const noexcept { return buffer_->high_water(); }
  const std::string& name() const noexcept { return buffer_->name(); }
  ring_buffer& buffer() const noexcept { return *buffer_; }
  const std::shared_ptr<ring_buffer>& shared_buffer() const noexcept { return buffer_; }

private:
  // push and pop past their first try, out of the caller's inline path. A small message goes
  // by value (in registers): passed by address, one built at the call would be built on the
  // stack for it, and the fast path's copy would reload it from there.
  using waiting_message = std::conditional_t<(sizeof(T) <= 2 * sizeof(void*)), T, const T&>;
  void push_waiting(waiting_message m, std::chrono::nanoseconds timeout);
  bool push_waiting(waiting_message m, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept;
  /// try_pop without the empty look's count: for pop(), whose wait backs off by itself.
  bool take_one(T& m) noexcept {
    const std::byte* slot = buffer_->next_pop_slot();
    if (slot == nullptr) return false;
    std::memcpy(&m, slot, sizeof(T));
    buffer_->drop_n(1);
    return true;
  }
  bool pop_waiting(T& m, std::chrono::nanoseconds timeout);
  bool pop_waiting(T& m, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept;

  // A slot holds one T (sizeof(T) bytes) and slots start on a 64-byte boundary: a run of slots is
  // an array of T.
  template <class U, class Byte> static std::span<U> typed(std::span<Byte> bytes) noexcept {
    static_assert(alignof(T) <= 64, "ring slots are aligned to 64 bytes");
    return {reinterpret_cast<U*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  std::shared_ptr<ring_buffer> buffer_;
};

/// The error a blocked push or pop reports when its time runs out.
error ring_timeout_error(const ring_buffer& r, bool push, std::chrono::nanoseconds timeout);
/// The error a blocked push or pop reports when the ring was cancelled.
error ring_cancelled_error(const ring_buffer& r, bool push);
/// The error a push reports when the ring was closed (its stream ended) before it.
error ring_closed_error(const ring_buffer& r);

} // namespace ringpipe

template <class T>
bool ringpipe::ring<T>::push_waiting(waiting_message m, std::chrono::nanoseconds timeout,
                                     std::error_code& ec) noexcept {
  bool pushed = false;
  const auto done = [&] { return buffer_->cancelled() || (pushed = try_push(m)) || buffer_->closed(); };
  if (done() || buffer_->wait_as_producer(done, timeout)) {
    if (pushed) return true;
    ec = make_error_code(buffer_->cancelled() ? errc::cancelled : errc::closed);
    return false;
  }
  ec = make_error_code(errc::timeout);
  return false;
}

template <class T> void ringpipe::ring<T>::push_waiting(waiting_message m, std::chrono::nanoseconds timeout) {
  std::error_code ec;
  if (push_waiting(m, timeout, ec)) return;
  if (ec == make_error_code(errc::cancelled)) throw ring_cancelled_error(*buffer_, true);
  if (ec == make_error_code(errc::closed)) throw ring_closed_error(*buffer_);
  throw ring_timeout_error(*buffer_, true, timeout);
}

template <class T>
bool ringpipe::ring<T>::pop_waiting(T& m, std::chrono::nanoseconds timeout, std::error_code& ec) noexcept {
  bool got = false;
  // A cancelled ring gives nothing more: what it holds is counted by the stop that cancelled it.
  const auto done = [&] { return buffer_->cancelled() || (got = take_one(m)) || buffer_->drained(); };
  if (done() || buffer_->wait_as_consumer(done, timeout)) {
    if (got) return true;
    if (buffer_->cancelled()) {
      ec = make_error_code(errc::cancelled);
      return false;
    }
    return take_one(m);
  }
  ec = make_error_code(errc::timeout);
  return false;
}

template <class T> bool ringpipe::ring<T>::pop_waiting(T& m, std::chrono::nanoseconds timeout) {
  std::error_code ec;
  const bool got = pop_waiting(m, timeout, ec);
  if (ec == make_error_code(errc::cancelled)) throw ring_cancelled_error(*buffer_, false);
  if (ec) throw ring_timeout_error(*buffer_, false, timeout);
  return got;
}

template <class T>
std::size_t ringpipe::ring<T>::push_all(std::span<const T> ms, std::chrono::nanoseconds timeout,
                                        std::error_code& ec) noexcept {
  ec.clear();
  std::size_t pushed = 0;
  const auto done = [&] {
    if (buffer_->cancelled()) return true;
    pushed += buffer_->push_n_bytes(ms.data() + pushed, ms.size() - pushed);
    return pushed == ms.size() || buffer_->closed();
  };
  if (done() || buffer_->wait_as_producer(done, timeout)) {
    if (pushed < ms.size()) ec = make_error_code(buffer_->cancelled() ? errc::cancelled : errc::closed);
    return pushed;
  }
  ec = make_error_code(errc::timeout);
  return pushed;
}

template <class T>
std::size_t ringpipe::ring<T>::pop_some(std::span<T> ms, std::chrono::nanoseconds timeout,
                                        std::error_code& ec) noexcept {
  ec.clear();
  std::size_t got = 0;
  bool ended = false;
  const auto done = [&] {
    if (buffer_->cancelled()) return true;
    ended = buffer_->drained(); // before the pop: a message pushed before the close is not missed
    got = buffer_->pop_n_bytes(ms.data(), ms.size());
    return got > 0 || ended;
  };
  if (done() || buffer_->wait_as_consumer(done, timeout)) {
    if (got == 0 && !ended) ec = make_error_code(errc::cancelled);
    return got;
  }
  ec = make_error_code(errc::timeout);
  return got;
}
