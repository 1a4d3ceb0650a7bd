#pragma once
// Streams test messages through a started pipeline from one application thread: runs of `run`
// pushed into an inlet and popped from an outlet (copied through arrays of the thread's own with
// push_n/pop_n, or made and checked in place in the rings' windows), every message checked after
// `hops` passes through test_map, and a backoff when a pass moved nothing (so the thread leaves its
// core to the kernels). Shared by tests and ringpipe-bench, so that both drive pipelines the same
// way.

#include <ringpipe/backoff.hpp>
#include <ringpipe/pipeline.hpp>

#include "test_message.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace ringpipe::testing {

struct stream_outcome {
  std::uint32_t received = 0;
  std::uint32_t wrong = 0; ///< out of order or with a wrong check word
  double seconds = 0;      ///< from the first push to the last pop
  double rate() const { return seconds > 0 ? received / seconds : 0; }
};

/// How the application thread moves its messages.
enum class stream_form {
  copies,  ///< push_n / pop_n of arrays of its own (made once; a full ring takes them later)
  windows, ///< made in the inlet's write_window, checked in the outlet's read_window: no copies
};

/// Pushes messages 0..count-1 into `inlet` and pops them from `outlet` until all arrived or
/// `limit` passed; rethrows the pipeline's failure; leaves the inlet open.
template <std::size_t N>
stream_outcome stream_test_messages(pipeline& p, const std::string& inlet, const std::string& outlet,
                                    std::uint32_t count, int hops, std::chrono::nanoseconds limit,
                                    std::size_t run = 256, stream_form form = stream_form::copies) {
  using msg = test_message<N>;
  auto push = p.inlet<msg>(inlet);
  auto pop = p.outlet<msg>(outlet);
  std::vector<msg> batch(form == stream_form::copies ? run : 0), got(batch.size());
  std::size_t made = 0, pushed = 0; // of `batch`: messages made, and pushed so far
  stream_outcome o;
  std::uint32_t sent = 0;
  const auto check = [&](std::span<const msg> in) {
    for (const msg& m : in) {
      if (m.seq != o.received || m.check != test_check_after(o.received, hops)) ++o.wrong;
      ++o.received;
    }
  };
  backoff idle;
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + limit;
  while (o.received < count && std::chrono::steady_clock::now() < deadline) {
    std::size_t moved = 0;
    if (form == stream_form::windows) {
      const std::span<msg> room =
          sent < count ? push.write_window(std::min<std::size_t>(count - sent, run)) : std::span<msg>{};
      for (std::size_t i = 0; i < room.size(); ++i)
        room[i] = make_test_message<N>(sent + static_cast<std::uint32_t>(i));
      push.commit_push(room.size());
      sent += static_cast<std::uint32_t>(room.size());
      const std::span<const msg> results = pop.read_window(run);
      check(results);
      pop.drop_n(results.size());
      moved = room.size() + results.size();
    } else {
      if (pushed == made && sent < count) { // a full ring leaves the rest of a run for later passes
        made = std::min<std::size_t>(count - sent, run), pushed = 0;
        for (std::size_t i = 0; i < made; ++i)
          batch[i] = make_test_message<N>(sent + static_cast<std::uint32_t>(i));
      }
      const auto n = push.push_n(std::span<const msg>(batch).subspan(pushed, made - pushed));
      pushed += n, sent += static_cast<std::uint32_t>(n);
      const auto popped = pop.pop_n(std::span(got));
      check(std::span<const msg>(got).first(popped));
      moved = n + popped;
    }
    if (auto f = p.failure()) std::rethrow_exception(f);
    if (moved == 0) {
      idle.wait();
    } else {
      idle.reset();
    }
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

} // namespace ringpipe::testing
