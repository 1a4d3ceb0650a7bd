#pragma once
// The untyped ring: storage laid out the same in C++ and in OpenCL C (cl/ringpipe/ring.clh),
// and the host side of either end. ring<T> (ring.hpp) is its typed face.

#include <ringpipe/error.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>

namespace ringpipe {

class device;

/// The ring header, shared with rp_ring in cl/ringpipe/ring.clh. Slots follow it.
struct ring_header {
  alignas(64) std::uint32_t head; ///< producer side: messages ever pushed (wraps)
  alignas(64) std::uint32_t tail; ///< consumer side: messages ever popped (wraps)
  alignas(64) std::uint32_t capacity;
  std::uint32_t slot_size;
  std::uint32_t flags; ///< producer side: ring_closed
  std::uint32_t mask;
};
static_assert(offsetof(ring_header, head) == 0 && offsetof(ring_header, tail) == 64);
static_assert(offsetof(ring_header, capacity) == 128 && offsetof(ring_header, slot_size) == 132);
static_assert(offsetof(ring_header, flags) == 136 && offsetof(ring_header, mask) == 140);
static_assert(sizeof(ring_header) == 192, "cl/ringpipe/ring.clh: RP_HEADER_BYTES");
inline constexpr std::uint32_t ring_closed = 1;

/// Where a ring's bytes live.
enum class ring_memory {
  host, ///< ordinary host memory: host threads only, or batched kernels through a device mirror
  svm,  ///< fine-grained SVM with atomics: host and kernels of one context poll it directly
};

struct ring_options {
  std::string name = "ring";         ///< used in errors and metrics
  std::uint32_t initial_counter = 0; ///< start value of head and tail (tests of the 32-bit wrap)
};

/// Untyped storage and host-side operations of one ring. Either end may be host code; each end
/// must be used by one thread at a time (single producer, single consumer).
class ring_buffer {
public:
  /// Host memory.
  ring_buffer(std::uint32_t capacity, std::uint32_t slot_size, const ring_options& options = {});
  /// Memory `dev`'s kernels can poll: fine-grained SVM in its context when the device has it,
  /// otherwise host memory (kernels there run batched through a device mirror).
  ring_buffer(const device& dev, std::uint32_t capacity, std::uint32_t slot_size, const ring_options& options = {});
  ~ring_buffer();
  ring_buffer(const ring_buffer&) = delete;
  ring_buffer& operator=(const ring_buffer&) = delete;

  const std::string& name() const noexcept { return name_; }
  ring_memory memory() const noexcept { return memory_; }
  /// The SVM context the ring lives in (null for host memory).
  cl_context svm_context() const noexcept { return svm_context_; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  std::uint32_t slot_size() const noexcept { return slot_size_; }
  std::size_t bytes() const noexcept { return bytes_; }
  ring_header* header() const noexcept { return header_; }
  std::byte* slot(std::uint32_t counter) const noexcept {
    return slots_ + static_cast<std::size_t>(counter & (capacity_ - 1)) * slot_size_;
  }
  /// Copies `n` slots from counter `from` on into contiguous `dst`, in at most two runs (up to
  /// the end of the slot array, then from its start). Moves no counter.
  void copy_out(std::uint32_t from, std::uint32_t n, std::byte* dst) const noexcept;

  // --- producer side ---
  [[nodiscard]] bool try_push_bytes(const void* message) noexcept;
  /// The slot the next push fills, or null when the ring is full; commit_push(1) publishes it.
  /// Inline, so that a typed push writes a message built at the call straight into the slot
  /// (copied from the stack, its narrow stores would be reloaded as one wide load, which waits
  /// for every store before it: the last message's, to a line the consumer just read).
  std::byte* next_push_slot() noexcept {
    const auto head = load_head(std::memory_order_relaxed);
    if ((cached_space(head) == 0 && space() == 0) || ended()) return nullptr;
    return slot(head);
  }
  /// Pushes up to `count` messages of slot_size bytes each; returns how many fit (none once closed).
  std::size_t push_n_bytes(const void* messages, std::size_t count) noexcept;
  /// Free slots as the producer sees them.
  std::uint32_t space() noexcept;
  /// Up to `max` free slots after the head that lie in one piece (empty when the ring is full or closed),
  /// to be filled in place; commit_push(n) then publishes the first n. Saves the copy of push_n.
  std::span<std::byte> write_window(std::size_t max) noexcept;
  void commit_push(std::size_t n) noexcept {
    if (n == 0) return;
    store_head(load_head(std::memory_order_relaxed) + static_cast<std::uint32_t>(n));
    note_pushed(static_cast<std::uint32_t>(n));
    wake_consumer();
  }
  /// Ends the stream: the consumer drains what was pushed, then sees the end. Pushes after it move
  /// nothing (a blocking push fails with errc::closed): a consumer that has seen the end would
  /// never take them.
  void close() noexcept;

  // --- consumer side ---
  [[nodiscard]] bool try_pop_bytes(void* message) noexcept;
  /// The slot the next pop takes, or null when the ring is empty; drop_n(1) gives it back.
  const std::byte* next_pop_slot() noexcept {
    const auto tail = load_tail(std::memory_order_relaxed);
    if (cached_queued(tail) == 0 && !refresh_consumer_head(tail)) return nullptr;
    return slot(tail);
  }
  std::size_t pop_n_bytes(void* messages, std::size_t count) noexcept;
  /// Copies up to `count` messages without taking them; drop_n(k) then takes the first k of them.
  std::size_t peek_n_bytes(void* messages, std::size_t count) noexcept;
  void drop_n(std::size_t count) noexcept {
    if (count == 0) return;
    publish_tail(load_tail(std::memory_order_relaxed) + static_cast<std::uint32_t>(count));
    note_popped(static_cast<std::uint32_t>(count));
  }
  /// Up to `max` queued messages from the tail that lie in one piece, to be read in place (they
  /// stay valid until drop_n gives their slots back). Saves the copy of peek_n.
  std::span<const std::byte> read_window(std::size_t max) noexcept;
  /// Closed by the producer and empty: the stream has ended.
  bool drained() noexcept;
  /// An application's call that does not wait found the ring empty: every empty_looks_per_yield-th
  /// such look yields the core. A push that launched a kernel on a CPU device woke one of its
  /// workers, a host thread the OS queues on the pusher's core; a loop of try_pop there kept it
  /// waiting for the rest of the loop's time slice (a sporadic round trip through a batched
  /// kernel on PoCL, two cores: 1.9 ms). About 1 us per yield where nothing waits.
  void note_empty_look() noexcept {
    if ((++empty_looks_ & (empty_looks_per_yield - 1)) == 0) yield_core();
  }
  static constexpr std::uint32_t empty_looks_per_yield = 1024;

  // --- either side ---
  /// Wakes every push and pop blocked on the ring (ring<T>::push/pop with a timeout): they fail
  /// with errc::cancelled and `reason`, and so do later blocking calls. The pipeline cancels its
  /// rings when it stops or fails, naming the stop or the failed stage. The first reason stays.
  void cancel(std::string reason) noexcept;
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  /// Why the ring was cancelled; empty before.
  std::string cancel_reason() const;

  // --- the consumer's wake ---
  /// What a host push or close calls, on the pushing thread, once after each want_push_wake().
  /// A new consumer (a kernel started again on the same rings) replaces the last one's, also
  /// while a producer pushes.
  void set_push_wake(std::function<void()> wake);
  /// The consumer sleeps on an empty ring: the next host push or close wakes it at once. A push
  /// that races the request may miss it; the consumer's timer is the fallback, so a missed wake
  /// costs one sleep, never a message.
  void want_push_wake() noexcept { push_wake_wanted_.store(true, std::memory_order_seq_cst); }
  bool push_wake_wanted() const noexcept { return push_wake_wanted_.load(std::memory_order_acquire); }
  /// want_push_wake() for a consumer that will sleep with no timer to fall back on: true where
  /// the wake is certain and the ring is still empty and open. Certain means every producer is a
  /// host thread that wakes (no device writes the head: note_device_producer) and this request
  /// is ordered before every thread's next push (a process-wide fence, about 1 us: for a
  /// consumer that has been idle a while, not for every idle look).
  bool promise_push_wake() noexcept;
  /// A device writes this ring's head from now on (a ring kernel's launch over shared memory
  /// publishes its results): no host push wakes the consumer, which must keep polling. A consumer
  /// that slept on a promise is woken to learn it.
  void note_device_producer() noexcept;
  /// The launch that wrote the head has returned (seen complete by the host): every move of the
  /// head is a host push again, until the next note_device_producer().
  void note_device_producer_returned() noexcept;
  bool device_producer() const noexcept { return device_producer_.load(std::memory_order_acquire); }
  /// Wakes an application thread asleep in wait_as_consumer (a publish or close does it too).
  void wake_sleeping_consumer() noexcept;

  // --- the producer's wake: the mirror image, for a producer held by a full ring ---
  /// What a host pop (or a driver's publish of the tail) calls, on the popping thread, once after
  /// each want_pop_wake(): the producer's proxy or host stage. None: an application thread
  /// asleep in wait_as_producer is woken.
  void set_pop_wake(std::function<void()> wake);
  void want_pop_wake() noexcept { pop_wake_wanted_.store(true, std::memory_order_seq_cst); }
  bool pop_wake_wanted() const noexcept { return pop_wake_wanted_.load(std::memory_order_acquire); }
  /// want_pop_wake() for a producer that will sleep with no timer to fall back on: true where the
  /// wake is certain (no device writes the tail: note_device_consumer; the request fenced as in
  /// promise_push_wake) and fewer than `room` slots are still free, the ring not cancelled.
  bool promise_pop_wake(std::uint32_t room = 1) noexcept;
  /// A device writes this ring's tail from now on (a ring kernel's launch pops it over shared
  /// memory): no host pop wakes the producer, which must keep polling. A producer asleep on a
  /// promise is woken. note_device_consumer_returned(): that launch has returned.
  void note_device_consumer() noexcept;
  void note_device_consumer_returned() noexcept;
  bool device_consumer() const noexcept { return device_consumer_.load(std::memory_order_acquire); }
  void wake_sleeping_producer() noexcept;

  // --- the producer's help ---
  /// What an application thread waiting in wait_as_consumer calls on its own thread when the
  /// producer offers it: a batched kernel's proxy publishes a completed launch there instead of
  /// waking an io thread to (which would then wake the application). True if it did something.
  void set_consumer_help(std::function<bool()> help);
  /// Producer: its next step would publish. True if an application thread waits on the ring and
  /// takes it (woken here where it sleeps); otherwise the producer must step itself.
  bool offer_help() noexcept {
    // Both sequentially consistent, as the consumer's end of its wait: either it sees the
    // offer before it leaves, or this sees that it has left.
    help_offered_.store(true, std::memory_order_seq_cst);
    if (!consumer_waits_.load(std::memory_order_seq_cst)) return false;
    wake_sleeping_consumer();
    return true;
  }
  /// Producer: its own step publishes now.
  void withdraw_help() noexcept {
    if (help_offered_.load(std::memory_order_relaxed)) help_offered_.store(false, std::memory_order_relaxed);
  }

  // --- either side (a snapshot) ---
  std::uint32_t size() const noexcept;
  bool closed() const noexcept;
  /// Highest fill seen when either host side refreshed its view of the other counter.
  std::uint32_t high_water() const noexcept { return high_water_.load(std::memory_order_relaxed); }
  std::uint64_t pushed() const noexcept { return pushed_.load(std::memory_order_relaxed); }
  std::uint64_t popped() const noexcept { return popped_.load(std::memory_order_relaxed); }

  // Counter access with the orders of the protocol, for the ring's host-side movers.
  std::uint32_t load_head(std::memory_order o) const noexcept { return std::atomic_ref(header_->head).load(o); }
  std::uint32_t load_tail(std::memory_order o) const noexcept { return std::atomic_ref(header_->tail).load(o); }
  /// Publishes messages written into the slots, and wakes a consumer that asked for it.
  void publish_head(std::uint32_t h) noexcept {
    store_head(h);
    wake_consumer();
  }
  /// Gives slots back, and wakes a producer that asked for it.
  void publish_tail(std::uint32_t t) noexcept {
    std::atomic_ref(header_->tail).store(t, std::memory_order_release);
    wake_producer();
  }
  void note_fill(std::uint32_t fill) noexcept;

  /// Waits, with adaptive backoff, until `ready()` or `timeout`; false on timeout.
  template <class Ready> static bool wait_until(Ready&& ready, std::chrono::nanoseconds timeout);
  /// The same for this ring's consumer: once it sleeps, a host push, publish, close or cancel
  /// wakes it at once (a push that races its request is found when its sleep ends, as before).
  template <class Ready> bool wait_as_consumer(Ready&& ready, std::chrono::nanoseconds timeout);
  /// The same for this ring's producer waiting for room: once it sleeps, a host pop or cancel
  /// wakes it at once.
  template <class Ready> bool wait_as_producer(Ready&& ready, std::chrono::nanoseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    return wait_backing_off(std::forward<Ready>(ready), timeout,
                            [this, deadline](std::chrono::microseconds d) { sleep_as_producer(d, deadline); });
  }

private:
  /// wait_until's loop; `sleep`, where given, is how the backoff sleeps (backoff::wait).
  template <class Ready, class... Sleep>
  static bool wait_backing_off(Ready&& ready, std::chrono::nanoseconds timeout, Sleep&&... sleep);
  void init(std::uint32_t capacity, std::uint32_t slot_size, const ring_options& options);
  // Each host end's cached view of the other end: 0 also where it is older than a lap (that
  // end's own side was used elsewhere meanwhile: a kernel's driver, then its owner), so that it
  // is looked at again instead of trusted.
  std::uint32_t cached_space(std::uint32_t head) const noexcept {
    const std::uint32_t used = head - producer_tail_cache_;
    return used >= capacity_ ? 0 : capacity_ - used;
  }
  std::uint32_t cached_queued(std::uint32_t tail) const noexcept {
    const std::uint32_t queued = consumer_head_cache_ - tail;
    return queued > capacity_ ? 0 : queued;
  }
  /// The consumer's view of the head: reloaded when it shows fewer than `want` messages.
  void refresh_consumer_cache(std::uint32_t tail, std::size_t want) noexcept;
  /// Reloads the consumer's view of the head at an empty view; false if the ring is empty.
  bool refresh_consumer_head(std::uint32_t tail) noexcept;
  void store_head(std::uint32_t h) noexcept { std::atomic_ref(header_->head).store(h, std::memory_order_release); }
  /// closed() for the producer's own pushes: it closed the ring itself, or a thread it ordered after.
  bool ended() const noexcept {
    return (std::atomic_ref(header_->flags).load(std::memory_order_relaxed) & ring_closed) != 0;
  }
  /// The consumer's sleep in wait_as_consumer: up to `d`, or until a wake; after the backoff's
  /// longest sleep, until a promised wake or `deadline` (promise_push_wake).
  void sleep_as_consumer(std::chrono::microseconds d, std::chrono::steady_clock::time_point deadline) noexcept;
  void sleep_as_producer(std::chrono::microseconds d, std::chrono::steady_clock::time_point deadline) noexcept;
  void note_pushed(std::uint32_t n) noexcept { pushed_.store(pushed() + n, std::memory_order_relaxed); }
  void note_popped(std::uint32_t n) noexcept { popped_.store(popped() + n, std::memory_order_relaxed); }
  /// After a push or close: one load on the producer's line while nobody waits.
  void wake_consumer() noexcept {
    // The publish before the look at the request, also for the compiler: the consumer's side
    // of the handshake (promise_push_wake) orders both for the processor.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (push_wake_wanted_.load(std::memory_order_acquire) &&
        push_wake_wanted_.exchange(false, std::memory_order_acq_rel))
      call_push_wake();
  }
  void call_push_wake() noexcept;
  /// After a pop: one load on the consumer's line while nobody waits (as wake_consumer).
  void wake_producer() noexcept {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (pop_wake_wanted_.load(std::memory_order_acquire) && pop_wake_wanted_.exchange(false, std::memory_order_acq_rel))
      call_pop_wake();
  }
  void call_pop_wake() noexcept;
  bool call_consumer_help() noexcept;
  static void yield_core() noexcept;
  /// One load while nothing is offered (a waiting consumer's every look). Sequentially consistent,
  /// as the end of the wait's store before it and offer_help's pair: an acquire load could be
  /// ordered before that store (on x86 both are the same plain load).
  bool take_help() noexcept {
    return help_offered_.load(std::memory_order_seq_cst) && help_offered_.exchange(false, std::memory_order_acq_rel) &&
           call_consumer_help();
  }

  std::string name_;
  ring_memory memory_ = ring_memory::host;
  cl_context svm_context_ = nullptr;
  std::uint32_t capacity_ = 0;
  std::uint32_t slot_size_ = 0;
  std::size_t bytes_ = 0;
  ring_header* header_ = nullptr;
  std::byte* slots_ = nullptr;
  // Each host end's cached view of the other end's counter, on separate lines.
  alignas(64) std::uint32_t producer_tail_cache_ = 0; // producer side
  std::atomic<bool> push_wake_wanted_{false};         // the consumer sets it only before it sleeps
  std::atomic<bool> device_producer_{false};          // a device writes the head: no push wakes
  alignas(64) std::uint32_t consumer_head_cache_ = 0; // consumer side
  std::uint32_t empty_looks_ = 0;                     // consumer side: note_empty_look
  std::atomic<bool> pop_wake_wanted_{false};          // the producer sets it only before it sleeps
  std::atomic<bool> device_consumer_{false};          // a device writes the tail: no pop wakes
  alignas(64) std::atomic<std::uint32_t> high_water_{0};
  std::atomic<std::uint64_t> pushed_{0}; // producer side writes
  std::atomic<bool> cancelled_{false};
  mutable std::mutex cancel_mutex_;
  std::string cancel_reason_;  // set once, before cancelled_
  std::mutex push_wake_mutex_; // taken once per wake, never on a push that wakes nobody
  std::function<void()> push_wake_;
  std::function<bool()> consumer_help_; // under push_wake_mutex_
  std::atomic<bool> help_offered_{false};
  std::atomic<bool> consumer_waits_{false}; // an application thread sleeps in wait_as_consumer, or is between sleeps
  std::mutex consumer_sleep_mutex_;         // an application thread blocked in pop sleeps on it
  std::condition_variable consumer_sleep_;
  std::mutex pop_wake_mutex_; // taken once per wake, never on a pop that wakes nobody
  std::function<void()> pop_wake_;
  std::mutex producer_sleep_mutex_; // an application thread blocked in push sleeps on it
  std::condition_variable producer_sleep_;
  // A promised sleep's limit: only a safety net, as the wake it was promised comes by itself.
  static constexpr std::chrono::milliseconds promised_sleep_limit{250};
  alignas(64) std::atomic<std::uint64_t> popped_{0}; // consumer side writes
};

} // namespace ringpipe

#include <ringpipe/backoff.hpp>
#include <ringpipe/detail/blocked_wait.hpp>

template <class Ready, class... Sleep>
bool ringpipe::ring_buffer::wait_backing_off(Ready&& ready, std::chrono::nanoseconds timeout, Sleep&&... sleep) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  backoff b;
  detail::blocked_wait blocked;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (b.sleeps_next()) blocked.sleeping();
    b.wait(std::forward<Sleep>(sleep)...);
  }
  return true;
}

template <class Ready> bool ringpipe::ring_buffer::wait_until(Ready&& ready, std::chrono::nanoseconds timeout) {
  return wait_backing_off(std::forward<Ready>(ready), timeout);
}

template <class Ready> bool ringpipe::ring_buffer::wait_as_consumer(Ready&& ready, std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool got = wait_backing_off([&] { return ready() || (take_help() && ready()); }, timeout,
                              [this, deadline](std::chrono::microseconds d) { sleep_as_consumer(d, deadline); });
  // A wait that slept (only then is an offer left to it): an offer made as it ended woke nobody
  // else, so it is taken here. One that never slept pays nothing (a resident kernel's round trip).
  if (consumer_waits_.load(std::memory_order_relaxed)) {
    consumer_waits_.store(false, std::memory_order_seq_cst);
    if (take_help() && !got) got = ready();
  }
  return got;
}
