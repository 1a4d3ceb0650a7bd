#pragma once
// Streams test messages through a started pipeline from one application thread: runs of `run`
// pushed into an inlet and popped from an outlet, every message checked after `hops` passes
// through test_map, and a backoff when a pass moved nothing (so the thread leaves its core to the
// kernels). Shared by tests and ringpipe-bench, so that both drive pipelines the same way.

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

/// Pushes messages 0..count-1 into `inlet` and pops them from `outlet` until all arrived or
/// `limit` passed; rethrows the pipeline's failure; leaves the inlet open.
template <std::size_t N>
stream_outcome stream_test_messages(pipeline& p, const std::string& inlet, const std::string& outlet,
                                    std::uint32_t count, int hops, std::chrono::nanoseconds limit,
                                    std::size_t run = 256) {
  auto push = p.inlet<test_message<N>>(inlet);
  auto pop = p.outlet<test_message<N>>(outlet);
  std::vector<test_message<N>> batch(run), got(run);
  stream_outcome o;
  std::uint32_t sent = 0;
  backoff idle;
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + limit;
  while (o.received < count && std::chrono::steady_clock::now() < deadline) {
    std::size_t moved = 0;
    if (sent < count) {
      const auto n = std::min<std::size_t>(count - sent, run);
      for (std::size_t i = 0; i < n; ++i)
        batch[i] = make_test_message<N>(sent + static_cast<std::uint32_t>(i));
      moved = push.push_n(std::span<const test_message<N>>(batch).first(n));
      sent += static_cast<std::uint32_t>(moved);
    }
    const auto popped = pop.pop_n(std::span(got));
    for (std::size_t i = 0; i < popped; ++i, ++o.received)
      if (got[i].seq != o.received || got[i].check != test_check_after(o.received, hops)) ++o.wrong;
    if (auto f = p.failure()) std::rethrow_exception(f);
    if (moved + popped == 0) {
      idle.wait();
    } else {
      idle.reset();
    }
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

} // namespace ringpipe::testing
