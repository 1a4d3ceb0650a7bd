#pragma once
// Host functions as host stages call them: once per run of messages, as bytes. The adapters
// below wrap what users write, per message or per batch, so that the only call through
// std::function is one per run; the per-message call to the user's function is inlined here.

#include <ringpipe/error.hpp>

#include <atomic>
#include <cstddef>
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
  bool stop_seen() const noexcept { return stopped != nullptr && stopped->load(std::memory_order_relaxed); }
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
template <class T> T load_message(const std::byte* p) {
  T m;
  std::memcpy(&m, p, sizeof(T));
  return m;
}
inline void check_batch_count(std::size_t returned, std::size_t room, const char* what) {
  if (returned > room)
    throw error(make_error_code(errc::invalid_argument), std::string(what) + " returned " + std::to_string(returned) +
                                                             " messages for a span of " + std::to_string(room));
}

template <class T, class Gen> generate_run per_message_source(Gen gen) {
  return [gen = std::move(gen)](std::byte* out, std::size_t room, run_progress& p) mutable {
    while (p.made < room) {
      std::optional<T> m = gen();
      const bool stopped = p.stop_seen(); // one look a message: stopped_inside implies it
      if (stopped && p.stopped_inside) return;
      if (!m) {
        p.ended = true;
        return;
      }
      std::memcpy(out + p.made * sizeof(T), &*m, sizeof(T));
      ++p.made;
      if (stopped) return;
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
    while (p.taken < n) {
      const In m = load_message<In>(in + p.taken * sizeof(In));
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
    while (p.taken < n) {
      fn(static_cast<const In&>(load_message<In>(in + p.taken * sizeof(In))));
      ++p.taken;
      if (p.stop_seen()) return;
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
