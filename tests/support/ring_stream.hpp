#pragma once
// Streams test messages through ring kernels from one thread (tests that drive kernels directly,
// without a pipeline): pushes and pops interleaved, every message checked exactly once, in order,
// transformed `hops` times; `keep` says which sequence numbers survive (filters).

#include <ringpipe/kernel.hpp>
#include <ringpipe/ring.hpp>

#include "test_message.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace ringpipe::testing {

using msg16 = test_message<16>;

// Streams `count` messages host -> in -> kernel(s) -> out -> host from one thread, interleaving
// pushes and pops, and checks every message: exactly once, in order, transformed `hops` times.
// `keep` says which sequence numbers survive (filters). Messages are test_message<N>: every word
// of each is checked.
template <std::size_t N, class Keep>
void stream(ring<test_message<N>>& in, ring<test_message<N>>& out, std::uint32_t count, int hops, Keep keep,
            std::initializer_list<ring_kernel_base*> kernels, std::uint32_t sent_before = 0) {
  std::vector<test_message<N>> batch(256), got(256);
  std::uint32_t sent = sent_before, expected = 0, received = 0;
  auto last_progress = std::chrono::steady_clock::now();
  bool closed = false;
  for (;;) {
    bool progress = false;
    if (sent < count) {
      const auto n = std::min<std::uint32_t>(count - sent, static_cast<std::uint32_t>(batch.size()));
      for (std::uint32_t i = 0; i < n; ++i)
        batch[i] = make_test_message<N>(sent + i);
      const auto pushed = static_cast<std::uint32_t>(in.push_n(std::span(batch).first(n)));
      sent += pushed;
      progress |= pushed > 0;
      if (pushed > 0)
        for (auto* k : kernels)
          k->notify();
    } else if (!closed) {
      in.close();
      closed = true;
      for (auto* k : kernels)
        k->notify();
    }
    const auto popped = out.pop_n(got);
    for (std::size_t i = 0; i < popped; ++i) {
      while (!keep(expected))
        ++expected;
      ASSERT_EQ(got[i].seq, expected) << "message lost, duplicated or reordered after " << received;
      ASSERT_EQ(got[i].check, test_check_after(expected, hops)) << "seq " << expected;
      for (std::size_t w = 0; w < got[i].payload.size(); ++w)
        ASSERT_EQ(got[i].payload[w], static_cast<std::uint32_t>(expected + w))
            << "seq " << expected << ", payload word " << w;
      ++expected;
      ++received;
    }
    progress |= popped > 0;
    if (closed && out.drained()) break;
    const auto now = std::chrono::steady_clock::now();
    if (progress) {
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(20)) {
      for (auto* k : kernels)
        if (auto f = k->failure()) std::rethrow_exception(f);
      FAIL() << "no progress for 20 s after " << sent << " sent, " << received << " received";
    }
  }
  while (expected < count && !keep(expected))
    ++expected;
  EXPECT_EQ(expected, count) << "the stream ended early";
  for (auto* k : kernels)
    k->wait(std::chrono::seconds(10));
}

template <std::size_t N>
void stream(ring<test_message<N>>& in, ring<test_message<N>>& out, std::uint32_t count, ring_kernel_base& k) {
  stream(in, out, count, 1, [](std::uint32_t) { return true; }, {&k});
}

} // namespace ringpipe::testing
