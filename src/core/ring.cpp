#include <ringpipe/device.hpp>
#include <ringpipe/ring.hpp>

#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include <sys/mman.h>

namespace ringpipe {
namespace {

bool is_power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::size_t ring_bytes(std::uint32_t capacity, std::uint32_t slot_size) {
  const std::size_t raw = sizeof(ring_header) + static_cast<std::size_t>(capacity) * slot_size;
  return (raw + 63) / 64 * 64;
}

void check_shape(const std::string& name, std::uint32_t capacity, std::uint32_t slot_size) {
  if (!is_power_of_two(capacity) || capacity > (1u << 30)) {
    throw error(errc::invalid_argument,
                "ring '" + name + "': capacity " + std::to_string(capacity) + " is not a power of two in [1, 2^30]");
  }
  if (slot_size == 0) throw error(errc::invalid_argument, "ring '" + name + "': slot size is 0");
}

// Rings of at least this many bytes go on transparent huge pages where the kernel offers them
// (`madvise` mode, Debian's default): a stream of 1 MiB messages between two MPI ranks, whose
// single-copy receive pins and copies every page, ran 1.1-2x faster through rings on huge pages.
constexpr std::size_t huge_page = std::size_t{2} << 20;

// Cache-line aligned host memory for a ring (2 MiB aligned and advised onto huge pages when it is
// that big, before init() first touches it), or errc::out_of_memory naming it.
ring_header* host_allocate(const std::string& name, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (bytes >= huge_page) {
    const std::size_t whole = (bytes + huge_page - 1) / huge_page * huge_page;
    if (void* p = std::aligned_alloc(huge_page, whole); p != nullptr) {
      (void)madvise(p, whole, MADV_HUGEPAGE); // advice: where refused, small pages work as before
      return static_cast<ring_header*>(p);
    }
  }
#endif
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr)
    throw error(errc::out_of_memory,
                "ring '" + name + "': cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return static_cast<ring_header*>(p);
}

} // namespace

ring_buffer::ring_buffer(std::uint32_t capacity, std::uint32_t slot_size, const ring_options& options) {
  check_shape(options.name, capacity, slot_size);
  bytes_ = ring_bytes(capacity, slot_size);
  header_ = host_allocate(options.name, bytes_);
  init(capacity, slot_size, options);
}

ring_buffer::ring_buffer(const device& dev, std::uint32_t capacity, std::uint32_t slot_size,
                         const ring_options& options) {
  check_shape(options.name, capacity, slot_size);
  const auto& svm = dev.info().svm;
  bytes_ = ring_bytes(capacity, slot_size);
  if (svm.fine_buffer && svm.atomics) {
    if (bytes_ > dev.info().max_alloc) {
      throw error(errc::out_of_memory, "ring '" + options.name + "': " + std::to_string(bytes_) +
                                           " bytes exceed device '" + dev.name() + "' maximum allocation of " +
                                           std::to_string(dev.info().max_alloc) + " bytes");
    }
    void* p =
        clSVMAlloc(dev.context()(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS, bytes_, 64);
    if (p == nullptr) {
      throw error(errc::out_of_memory, "ring '" + options.name + "': clSVMAlloc of " + std::to_string(bytes_) +
                                           " bytes failed on device '" + dev.name() + "'");
    }
    memory_ = ring_memory::svm;
    svm_context_ = dev.context()();
    clRetainContext(svm_context_);
    header_ = static_cast<ring_header*>(p);
  } else {
    header_ = host_allocate(options.name, bytes_);
  }
  init(capacity, slot_size, options);
}

void ring_buffer::init(std::uint32_t capacity, std::uint32_t slot_size, const ring_options& options) {
  name_ = options.name;
  capacity_ = capacity;
  slot_size_ = slot_size;
  std::memset(static_cast<void*>(header_), 0, bytes_);
  header_->head = options.initial_counter;
  header_->tail = options.initial_counter;
  header_->capacity = capacity;
  header_->slot_size = slot_size;
  header_->mask = capacity - 1;
  slots_ = reinterpret_cast<std::byte*>(header_) + sizeof(ring_header);
  producer_tail_cache_ = options.initial_counter;
  consumer_head_cache_ = options.initial_counter;
  // Written last with release: publishes the header to whoever acquires the ring's counters (a
  // store rather than a fence, which ThreadSanitizer cannot model).
  std::atomic_ref(header_->flags).store(0, std::memory_order_release);
}

ring_buffer::~ring_buffer() {
  if (memory_ == ring_memory::svm) {
    clSVMFree(svm_context_, header_);
    clReleaseContext(svm_context_);
  } else {
    std::free(header_);
  }
}

void ring_buffer::note_fill(std::uint32_t fill) noexcept {
  auto seen = high_water_.load(std::memory_order_relaxed);
  while (fill > seen && !high_water_.compare_exchange_weak(seen, fill, std::memory_order_relaxed)) {
  }
}

std::uint32_t ring_buffer::space() noexcept {
  const auto head = load_head(std::memory_order_relaxed);
  producer_tail_cache_ = load_tail(std::memory_order_acquire);
  note_fill(head - producer_tail_cache_);
  return capacity_ - (head - producer_tail_cache_);
}

bool ring_buffer::try_push_bytes(const void* message) noexcept {
  std::byte* to = next_push_slot();
  if (to == nullptr) return false;
  std::memcpy(to, message, slot_size_);
  commit_push(1);
  return true;
}

std::size_t ring_buffer::push_n_bytes(const void* messages, std::size_t count) noexcept {
  if (ended()) return 0;
  const auto head = load_head(std::memory_order_relaxed);
  auto free = cached_space(head);
  if (free < count) free = space();
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(free, count));
  const auto* src = static_cast<const std::byte*>(messages);
  for (std::uint32_t i = 0; i < n;) {
    // Copy up to the end of the slot array in one piece.
    const auto index = (head + i) & (capacity_ - 1);
    const auto run = std::min(n - i, capacity_ - index);
    std::memcpy(slot(head + i), src + static_cast<std::size_t>(i) * slot_size_,
                static_cast<std::size_t>(run) * slot_size_);
    i += run;
  }
  if (n > 0) {
    store_head(head + n);
    note_pushed(n);
    wake_consumer();
  }
  return n;
}

std::span<std::byte> ring_buffer::write_window(std::size_t max) noexcept {
  const auto head = load_head(std::memory_order_relaxed);
  const auto contiguous = capacity_ - (head & (capacity_ - 1));
  const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(max, contiguous));
  auto free = cached_space(head);
  if (free < want) free = space();
  if (ended()) free = 0;
  return {slot(head), static_cast<std::size_t>(std::min(free, want)) * slot_size_};
}

void ring_buffer::close() noexcept {
  std::atomic_ref flags(header_->flags);
  flags.store(flags.load(std::memory_order_relaxed) | ring_closed, std::memory_order_release);
  wake_consumer();
  wake_sleeping_producer(); // a push blocked on the full ring (another thread's) fails now, not at its timeout
}

void ring_buffer::yield_core() noexcept { std::this_thread::yield(); }

bool ring_buffer::try_pop_bytes(void* message) noexcept {
  const std::byte* from = next_pop_slot();
  if (from == nullptr) return false;
  std::memcpy(message, from, slot_size_);
  drop_n(1);
  return true;
}

bool ring_buffer::refresh_consumer_head(std::uint32_t tail) noexcept {
  consumer_head_cache_ = load_head(std::memory_order_acquire);
  note_fill(consumer_head_cache_ - tail);
  return consumer_head_cache_ != tail;
}

std::size_t ring_buffer::pop_n_bytes(void* messages, std::size_t count) noexcept {
  const auto n = peek_n_bytes(messages, count);
  drop_n(n);
  return n;
}

void ring_buffer::refresh_consumer_cache(std::uint32_t tail, std::size_t want) noexcept {
  if (cached_queued(tail) < want) (void)refresh_consumer_head(tail);
}

std::size_t ring_buffer::peek_n_bytes(void* messages, std::size_t count) noexcept {
  const auto tail = load_tail(std::memory_order_relaxed);
  refresh_consumer_cache(tail, count);
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(consumer_head_cache_ - tail, count));
  copy_out(tail, n, static_cast<std::byte*>(messages));
  return n;
}

std::span<const std::byte> ring_buffer::read_window(std::size_t max) noexcept {
  const auto tail = load_tail(std::memory_order_relaxed);
  const auto contiguous = capacity_ - (tail & (capacity_ - 1));
  const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(max, contiguous));
  refresh_consumer_cache(tail, want);
  return {slot(tail), static_cast<std::size_t>(std::min(consumer_head_cache_ - tail, want)) * slot_size_};
}

void ring_buffer::copy_out(std::uint32_t from, std::uint32_t n, std::byte* dst) const noexcept {
  const auto first = std::min(n, capacity_ - (from & (capacity_ - 1)));
  std::memcpy(dst, slot(from), static_cast<std::size_t>(first) * slot_size_);
  std::memcpy(dst + static_cast<std::size_t>(first) * slot_size_, slot(from + first),
              static_cast<std::size_t>(n - first) * slot_size_);
}

bool ring_buffer::drained() noexcept {
  if (!closed()) return false;
  return load_head(std::memory_order_acquire) == load_tail(std::memory_order_relaxed);
}

std::uint32_t ring_buffer::size() const noexcept {
  const auto tail = load_tail(std::memory_order_acquire);
  return load_head(std::memory_order_acquire) - tail;
}

bool ring_buffer::closed() const noexcept {
  return (std::atomic_ref(header_->flags).load(std::memory_order_acquire) & ring_closed) != 0;
}

std::string ring_buffer::cancel_reason() const {
  std::lock_guard lock(cancel_mutex_);
  return cancel_reason_;
}

error ring_cancelled_error(const ring_buffer& r, bool push) {
  return error(errc::cancelled,
               std::string(push ? "push to" : "pop from") + " ring '" + r.name() + "' ended: " + r.cancel_reason());
}

error ring_closed_error(const ring_buffer& r) {
  return error(errc::closed, "push to ring '" + r.name() +
                                 "' after it was closed: its stream had ended, so no consumer would take the message");
}

error ring_timeout_error(const ring_buffer& r, bool push, std::chrono::nanoseconds timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  const auto fill = std::to_string(r.size()) + "/" + std::to_string(r.capacity());
  return error(errc::timeout, push ? "push to ring '" + r.name() + "' timed out after " + std::to_string(ms) +
                                         " ms waiting for room (fill " + fill + "): its consumer is not draining it"
                                   : "pop from ring '" + r.name() + "' timed out after " + std::to_string(ms) +
                                         " ms waiting for a message (fill " + fill + ", not closed)");
}

} // namespace ringpipe
