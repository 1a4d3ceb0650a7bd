#pragma once
// Host mirror of tests/cl/test_map.cl's message: a sequence number, a check word and padding to
// N bytes. Tests, benchmarks and demos use it to verify every message end to end.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringpipe {

template <std::size_t N> struct test_message {
  static_assert(N >= 8 && N % 4 == 0, "test messages are at least 8 bytes, in whole words");
  std::uint32_t seq;
  std::uint32_t check;
  std::array<std::uint32_t, (N - 8) / 4> payload;
};

/// The mixing function of tests/cl/test_map.cl.
constexpr std::uint32_t test_mix(std::uint32_t x) noexcept {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/// The check word a source puts on message `seq`.
constexpr std::uint32_t test_check(std::uint32_t seq) noexcept { return test_mix(seq * 2654435761u + 1u); }

/// The check word after `hops` passes through test_map.
constexpr std::uint32_t test_check_after(std::uint32_t seq, int hops) noexcept {
  std::uint32_t c = test_check(seq);
  for (int i = 0; i < hops; ++i)
    c = test_mix(c ^ seq);
  return c;
}

template <std::size_t N> test_message<N> make_test_message(std::uint32_t seq) noexcept {
  test_message<N> m{};
  m.seq = seq;
  m.check = test_check(seq);
  for (std::size_t i = 0; i < m.payload.size(); ++i)
    m.payload[i] = seq + static_cast<std::uint32_t>(i);
  return m;
}

/// What tests/cl/test_map.cl's test_verify kernel emits at the end of a stream.
struct test_summary {
  std::uint64_t count;       ///< messages seen
  std::uint64_t sum;         ///< sum of their check words
  std::uint32_t expected;    ///< next sequence number expected
  std::uint32_t errors;      ///< messages out of order or with a wrong check word
  std::uint32_t first_error; ///< sequence number expected at the first error
  std::uint32_t pad;
};
static_assert(sizeof(test_summary) == 32);

/// The sum test_verify reports for messages 0 .. count-1 after `hops` passes through test_map.
inline std::uint64_t test_checksum(std::uint32_t count, int hops) {
  std::uint64_t sum = 0;
  for (std::uint32_t s = 0; s < count; ++s)
    sum += test_check_after(s, hops);
  return sum;
}

/// Source text that builds tests/cl/test_map.cl for N-byte messages (embedded in the test support
/// library; it includes the library's own <ringpipe/stage.clh>).
std::string test_stages_source(std::size_t n);
/// test_map.cl plus tests/cl/relaunch_baseline.cl: one launch per message, for ringpipe-bench.
std::string relaunch_baseline_source(std::size_t n);
/// tests/cl/test_phases.cl: a raw kernel that runs phases at a ringpipe::barrier.
std::string test_phases_source();

} // namespace ringpipe
