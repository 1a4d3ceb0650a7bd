#pragma once
// Host functions as host stages call them: once per run of messages, as bytes. The adapters
// below wrap what users write, per message or per batch, so that the only call through
// std::function is one per run; the per-message call to the user's function is inlined here.

#include <ringpipe/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace ringpipe::detail {

/// How far a host function got through a run. When it throws, `at_risk` messages from `taken`
/// on are lost (one for a per-message function, the whole run for a batch function) and the
/// `made` results before them are delivered.
struct run_progress {
  std::size_t taken = 0;
  std::size_t made = 0;
  std::size_t at_risk = 1;
  bool ended = false; ///< sources: the stream ended after `made` messages
  /// The stage was stopped: a per-message adapter ends the run after the message it is on, and
  /// the rest stays in the ring for the stop's report to count.
  const std::atomic<bool>* stopped = nullptr;
  /// The function called pipeline::stop itself (set on its thread, from inside the call): the
  /// report counted the run as it stood, so what the function returns from that call was made
  /// after the stop and is not passed on (the messages it took count as given to it).
  bool stopped_inside = false;
  bool stop_seen() const noexcept { return seen(stopped); }
  /// The same look through an address read once (a per-message source keeps it in a register).
  static bool seen(const std::atomic<bool>* flag) noexcept {
    return flag != nullptr && flag->load(std::memory_order_relaxed);
  }
};

using generate_run = std::function<void(std::byte* out, std::size_t room, run_progress&)>;
using transform_run = std::function<void(const std::byte* in, std::size_t n, std::byte* out, run_progress&)>;
using consume_run = std::function<void(const std::byte* in, std::size_t n, run_progress&)>;

/// Batch functions see a host stage's blocks as arrays of messages: the blocks come from
/// operator new (aligned to __STDCPP_DEFAULT_NEW_ALIGNMENT__) and are filled by memcpy, which
/// creates the message objects in them.
template <class T> inline constexpr bool viewable_in_blocks = alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;
template <class T> std::span<const T> view_run(const std::byte* p, std::size_t n) {
  return {std::launder(reinterpret_cast<const T*>(p)), n};
}
template <class T> std::span<T> view_run(std::byte* p, std::size_t n) {
  return {std::launder(reinterpret_cast<T*>(p)), n};
}
inline void check_batch_count(std::size_t returned, std::size_t room, const char* what) {
  if (returned > room)
    throw error(make_error_code(errc::invalid_argument), std::string(what) + " returned " + std::to_string(returned) +
                                                             " messages for a span of " + std::to_string(room));
}

/// How many messages a per-message sink or transform copies out of the ring in one memcpy before
/// it calls the function on each: read one by one from lines a kernel has just written, each load
/// waits behind the function's work on the message before; a block's wide loads do not (16-byte
/// messages after a kernel: the sink's pipeline 12% faster, the transform's 9%; blocks of 4
/// were slower than none, the memcpy's call not amortised). Up to 64, within 1 KiB of the stack.
template <class T> inline constexpr std::size_t read_block = std::clamp<std::size_t>(1024 / sizeof(T), 1, 64);

/// How many of a run's last slots a per-message source cannot build its function's result in:
/// the std::optional<T> is longer than the T it leads, so there it would spill past the run.
template <class T> inline constexpr std::size_t source_spill = (sizeof(std::optional<T>) - 1) / sizeof(T);

/// A per-message source has its function build each result (a std::optional<T>, made in place by
/// the call) in the run's next slot, whose T leads it: no copy, and no wide load of a message
/// just stored field by field (store forwarding fails there: 6-8 ns a message). The optional's
/// flag spills into the slot after, which the run owns until it is pushed; the last
/// source_spill<T> slots, and a run not aligned for the optional, take a copy of a local result.
template <class T, class Gen> generate_run per_message_source(Gen gen) {
  // `out` is restrict: the function's own state (for all the compiler knows, anywhere) is not in
  // the run, so the compiler builds each result in the slot instead of aside and copying it.
  return [gen = std::move(gen)](std::byte* __restrict out, std::size_t room, run_progress& p) mutable {
    using returned = std::optional<T>;
    // Counted in registers (the function may, for all the compiler knows, write p: read back
    // from it, the count went through memory around every call) and stored after each message:
    // a stop from inside the function reads p.made.
    std::size_t made = p.made;
    const std::atomic<bool>* const stop = p.stopped;
    // After a call: whether its result counts (not the stream's end, nor made after a stop
    // from inside), and whether it is the run's last. One look at the stop flag a message.
    bool last = false;
    const auto counts = [&](const returned& m) {
      const bool stopped = run_progress::seen(stop);
      last = stopped || !m;
      if (!m && !(stopped && p.stopped_inside)) p.ended = true;
      return m && !(stopped && p.stopped_inside);
    };
    const bool aligned = reinterpret_cast<std::uintptr_t>(out) % alignof(returned) == 0;
    const std::size_t in_place = aligned && room > source_spill<T> ? room - source_spill<T> : 0;
    while (made < in_place && !last) {
      std::byte* const slot = out + made * sizeof(T);
      const returned* m = ::new (static_cast<void*>(slot)) returned(gen()); // guaranteed elision
      if (!counts(*m)) return;
      const auto* value = reinterpret_cast<const std::byte*>(&**m);
      if (value != slot) std::memmove(slot, value, sizeof(T)); // a T not leading (no library known)
      p.made = ++made;
    }
    while (made < room && !last) {
      const returned m = gen();
      if (!counts(m)) return;
      std::memcpy(out + made * sizeof(T), &*m, sizeof(T));
      p.made = ++made;
    }
  };
}

template <class T, class Gen> generate_run batch_source(Gen gen) {
  static_assert(viewable_in_blocks<T>, "batch functions take messages aligned to at most the default new alignment");
  return [gen = std::move(gen)](std::byte* out, std::size_t room, run_progress& p) mutable {
    const std::optional<std::size_t> n = gen(view_run<T>(out, room));
    if (p.stopped_inside) return;
    if (!n) {
      p.ended = true;
      return;
    }
    check_batch_count(*n, room, "a batch source");
    p.made = *n;
  };
}

template <class In, class Out, class Fn> transform_run per_message_transform(Fn fn) {
  return [fn = std::move(fn)](const std::byte* in, std::size_t n, std::byte* out, run_progress& p) mutable {
    alignas(In) std::byte copied[read_block<In> * sizeof(In)];
    while (p.taken < n) {
      const std::size_t block = std::min(read_block<In>, n - p.taken);
      std::memcpy(copied, in + p.taken * sizeof(In), block * sizeof(In));
      for (const In& m : view_run<In>(static_cast<const std::byte*>(copied), block)) {
        bool stopped = false; // one look a message: stopped_inside implies it
        if constexpr (std::is_same_v<std::invoke_result_t<Fn&, const In&>, std::optional<Out>>) {
          const std::optional<Out> r = fn(m);
          stopped = p.stop_seen();
          if (r && !(stopped && p.stopped_inside)) std::memcpy(out + p.made++ * sizeof(Out), &*r, sizeof(Out));
        } else {
          const Out r = fn(m);
          stopped = p.stop_seen();
          if (!(stopped && p.stopped_inside)) std::memcpy(out + p.made++ * sizeof(Out), &r, sizeof(Out));
        }
        ++p.taken;
        if (stopped) return;
      }
    }
  };
}

template <class In, class Out, class Fn> transform_run batch_transform(Fn fn) {
  static_assert(viewable_in_blocks<In> && viewable_in_blocks<Out>,
                "batch functions take messages aligned to at most the default new alignment");
  return [fn = std::move(fn)](const std::byte* in, std::size_t n, std::byte* out, run_progress& p) mutable {
    p.at_risk = n;
    const std::size_t made = fn(view_run<In>(in, n), view_run<Out>(out, n));
    check_batch_count(made, n, "a batch host function");
    p.taken = n;
    p.made = p.stopped_inside ? 0 : made;
  };
}

template <class In, class Fn> consume_run per_message_sink(Fn fn) {
  return [fn = std::move(fn)](const std::byte* in, std::size_t n, run_progress& p) mutable {
    alignas(In) std::byte copied[read_block<In> * sizeof(In)];
    // Counted in a register, stored after each call and never read back (the function may, for
    // all the compiler knows, write p): a throw or a stop from inside the function reads p.taken
    // as the messages before the one it is on.
    std::size_t taken = p.taken;
    while (taken < n) {
      const std::size_t block = std::min(read_block<In>, n - taken);
      std::memcpy(copied, in + taken * sizeof(In), block * sizeof(In));
      for (const In& m : view_run<In>(static_cast<const std::byte*>(copied), block)) {
        fn(m);
        p.taken = ++taken;
        if (p.stop_seen()) return;
      }
    }
  };
}

template <class In, class Fn> consume_run batch_sink(Fn fn) {
  static_assert(viewable_in_blocks<In>, "batch functions take messages aligned to at most the default new alignment");
  return [fn = std::move(fn)](const std::byte* in, std::size_t n, run_progress& p) mutable {
    p.at_risk = n;
    fn(view_run<In>(in, n));
    p.taken = n;
  };
}

} // namespace ringpipe::detail
