#pragma once
// Device arrays: a typed array on one device, in fine-grained SVM where the device reaches shared
// memory (kernels of its context, and the host, use it in place) and in a device buffer otherwise.
// Copies host <-> device and device <-> device take the path choose_copy() gives for the two ends,
// complete through Asio (callbacks, use_future, coroutines) or block with a timeout, and are
// counted in runtime::transfers(). A copy keeps both arrays alive until it ends. As with Asio's
// I/O objects, copies started together may run in any order: start one that depends on another
// from the other's completion (or use the blocking forms).
//
//   ringpipe::device_array<float> a(rt, rt.device_at(0), n, "a");
//   a.write(host_values);                                         // blocking, timed
//   auto done = ringpipe::async_copy(a, b, boost::asio::use_future);
//   kernel.set_arg(0, b);                                         // its memory, kept alive

#include <ringpipe/runtime.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>

namespace ringpipe {

class ring_kernel_base;
namespace detail {
struct array_storage;
}

enum class array_memory {
  shared, ///< fine-grained SVM of the device's context: the host and the context's devices use it in place
  buffer, ///< a device buffer: reached through copies
};
std::string_view to_string(array_memory m) noexcept;

/// How a copy ends: a null exception_ptr, or the ringpipe::error that names the array and device.
using copy_completion = std::function<void(std::exception_ptr)>;

/// Blocking copies wait this long unless told otherwise.
inline constexpr std::chrono::milliseconds default_copy_timeout{30000};

/// A device array without its element type: one allocation, or a sub-range of one.
class array_bytes {
public:
  array_bytes() = default;
  /// Allocates `bytes` on `dev`, in `memory` (default: shared where the device reaches shared
  /// memory, a buffer otherwise). Refused (errc::out_of_memory, with the sizes) beyond the device's
  /// largest allocation or its memory; shared memory on a device without it is refused, naming it.
  array_bytes(runtime& rt, const device& dev, std::size_t bytes, std::string name,
              std::optional<array_memory> memory = std::nullopt);

  bool valid() const noexcept { return storage_ != nullptr; }
  const device& dev() const;
  const std::string& name() const;
  runtime& owner() const;
  std::size_t size_bytes() const noexcept { return bytes_; }
  /// Where this view starts in its allocation.
  std::size_t offset_bytes() const noexcept { return offset_; }
  array_memory memory() const;
  /// Shared memory: the first byte, valid on the host and in kernels that can_access() the
  /// device; null for a buffer.
  void* data() const noexcept;
  /// Buffer memory: the whole allocation's buffer (offset_bytes() into it); empty for shared.
  const cl::Buffer& buffer() const;
  /// "array 'a' [0, 4096) on <device>": how errors name it.
  std::string describe() const;

  /// Whether both views are the same bytes of the same allocation.
  bool same_as(const array_bytes& other) const noexcept {
    return storage_ == other.storage_ && offset_ == other.offset_ && bytes_ == other.bytes_;
  }
  /// Whether the two views share a byte.
  bool overlaps(const array_bytes& other) const noexcept {
    return storage_ == other.storage_ && offset_ < other.offset_ + other.bytes_ && other.offset_ < offset_ + bytes_;
  }
  /// The bytes [offset, offset + bytes) of this view; refused past its end.
  array_bytes sub_bytes(std::size_t offset, std::size_t bytes) const;

  /// Starts copying size_bytes() from `host` into the array (the host memory stays valid until
  /// `done` runs). `done` is called once, on a runtime thread or before this returns.
  void start_write(const void* host, copy_completion done) const;
  void start_read(void* host, copy_completion done) const;
  /// Blocking forms: the host memory is touched only before they return, even on a timeout.
  void write_bytes(const void* host, std::chrono::milliseconds timeout) const;
  void read_bytes(void* host, std::chrono::milliseconds timeout) const;

  /// Binds the array as kernel argument `index` (see ring_kernel_base::set_arg).
  void bind_kernel_arg(ring_kernel_base& kernel, unsigned index) const;

protected:
  void check_same_size(std::size_t bytes, const char* what) const;

private:
  friend void start_copy_bytes(const array_bytes& from, const array_bytes& to, copy_completion done);
  friend void copy_bytes(const array_bytes& from, const array_bytes& to, std::chrono::milliseconds timeout);

  std::shared_ptr<detail::array_storage> storage_;
  std::size_t offset_ = 0;
  std::size_t bytes_ = 0;
};

/// Starts copying `from` into `to` (the same size), on the path choose_copy() gives their devices.
void start_copy_bytes(const array_bytes& from, const array_bytes& to, copy_completion done);
/// The same, blocking; errc::timeout, naming both arrays, after `timeout`.
void copy_bytes(const array_bytes& from, const array_bytes& to, std::chrono::milliseconds timeout);

namespace detail {
/// A copy_completion that runs `handler(e)` on the handler's associated executor (default: the
/// runtime's), so a copy completes the Asio way whatever thread saw it end. It is posted to the
/// runtime's threads first and dispatched from there: a runtime being destroyed waits for what it
/// posted, and an executor that runs handlers at once (use_future's) has then run this one too,
/// where a post to it went to Asio's system thread pool and could still be waiting.
template <class Handler> copy_completion deliver_to(runtime& rt, Handler&& handler) {
  auto held = std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
  auto executor = boost::asio::get_associated_executor(*held, rt.executor());
  return [held, executor, own = rt.executor()](std::exception_ptr e) {
    boost::asio::post(own, [held, executor, e]() mutable {
      boost::asio::dispatch(executor, [held, e]() mutable { std::move (*held)(e); });
    });
  };
}
} // namespace detail

/// A typed device array. Copies are shallow: a copy of the handle names the same memory.
template <class T> class device_array : public array_bytes {
  static_assert(std::is_trivially_copyable_v<T>, "device arrays hold trivially copyable elements");

public:
  using value_type = T;
  device_array() = default;
  device_array(runtime& rt, const device& dev, std::size_t count, std::string name = "array",
               std::optional<array_memory> memory = std::nullopt)
      : array_bytes(rt, dev, count * sizeof(T), std::move(name), memory) {}

  std::size_t size() const noexcept { return size_bytes() / sizeof(T); }
  /// Shared memory: the elements, in place; null for a buffer.
  T* data() const noexcept { return static_cast<T*>(array_bytes::data()); }
  /// Elements [first, first + count), the same memory.
  device_array sub(std::size_t first, std::size_t count) const {
    return device_array(sub_bytes(first * sizeof(T), count * sizeof(T)));
  }

  /// Copies `from` (exactly size() elements) into the array. Completion signature
  /// void(std::exception_ptr); `from` stays valid until then.
  template <class Token> auto async_write(std::span<const T> from, Token&& token) const {
    check_same_size(from.size_bytes(), "write");
    return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
        [self = *this, from](auto handler) {
          self.start_write(from.data(), detail::deliver_to(self.owner(), std::move(handler)));
        },
        token);
  }
  template <class Token> auto async_read(std::span<T> to, Token&& token) const {
    check_same_size(to.size_bytes(), "read");
    return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
        [self = *this, to](auto handler) {
          self.start_read(to.data(), detail::deliver_to(self.owner(), std::move(handler)));
        },
        token);
  }
  void write(std::span<const T> from, std::chrono::milliseconds timeout = default_copy_timeout) const {
    check_same_size(from.size_bytes(), "write");
    write_bytes(from.data(), timeout);
  }
  void read(std::span<T> to, std::chrono::milliseconds timeout = default_copy_timeout) const {
    check_same_size(to.size_bytes(), "read");
    read_bytes(to.data(), timeout);
  }
  /// The same, reporting a failure through `ec` instead of throwing.
  void write(std::span<const T> from, std::error_code& ec,
             std::chrono::milliseconds timeout = default_copy_timeout) const noexcept {
    ec = capture([&] { write(from, timeout); });
  }
  void read(std::span<T> to, std::error_code& ec,
            std::chrono::milliseconds timeout = default_copy_timeout) const noexcept {
    ec = capture([&] { read(to, timeout); });
  }

private:
  template <class> friend class split_array;
  explicit device_array(array_bytes bytes) : array_bytes(std::move(bytes)) {}
  template <class F> static std::error_code capture(F&& f) noexcept {
    try {
      f();
      return {};
    } catch (const std::system_error& e) {
      return e.code();
    } catch (...) {
      return make_error_code(errc::invalid_argument);
    }
  }
};

/// Copies `from` into `to` (same element type and size), device to device or within one device.
template <class T, class Token> auto async_copy(const device_array<T>& from, const device_array<T>& to, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      [from, to](auto handler) { start_copy_bytes(from, to, detail::deliver_to(from.owner(), std::move(handler))); },
      token);
}
template <class T>
void copy(const device_array<T>& from, const device_array<T>& to,
          std::chrono::milliseconds timeout = default_copy_timeout) {
  copy_bytes(from, to, timeout);
}

} // namespace ringpipe
