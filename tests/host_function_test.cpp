// The adapters between what users write per message and the runs host stages move
// (detail::per_message_source): every message made reaches the run, in order and intact, however
// the run ends (room filled, the stream's end, a throw, a stop from inside the function), also
// where the source keeps messages before it copies them out.

#include <ringpipe/detail/host_function.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

using namespace ringpipe::detail;

namespace {

struct reading {
  std::uint32_t seq;
  float value;
};
struct frame {
  std::uint32_t seq;
  std::array<std::uint32_t, 1023> words; // 4 KiB: kept one at a time
};
static_assert(source_keeps<reading> == 16 && source_keeps<frame> == 1);

template <class T> T made(std::uint32_t n) {
  T m{};
  m.seq = n;
  if constexpr (std::is_same_v<T, reading>)
    m.value = static_cast<float>(n) * 0.5f;
  else
    m.words.back() = n * 3;
  return m;
}

bool same(const reading& a, const reading& b) { return a.seq == b.seq && a.value == b.value; }
bool same(const frame& a, const frame& b) { return a.seq == b.seq && a.words == b.words; }

// Runs a per-message source over a run of `room`; `at(n)` says what its n-th call does.
template <class T> struct source_run {
  std::vector<std::byte> out;
  run_progress progress;
  std::atomic<bool> stop{false};
  std::uint32_t calls = 0;

  template <class At> void run(std::size_t room, At at) {
    out.assign(room * sizeof(T), std::byte{0xee});
    progress.stopped = &stop;
    auto gen = per_message_source<T>([&]() -> std::optional<T> { return at(calls++, *this); });
    gen(out.data(), room, progress);
  }
  /// The first `n` messages of the run are messages 0..n-1; the slot after them is untouched.
  void expect_made(std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      T m;
      std::memcpy(&m, out.data() + i * sizeof(T), sizeof(T));
      ASSERT_TRUE(same(m, made<T>(static_cast<std::uint32_t>(i)))) << "message " << i << " of " << n;
    }
    if (n * sizeof(T) < out.size()) {
      EXPECT_EQ(out[n * sizeof(T)], std::byte{0xee}) << "a slot past the run was written";
    }
  }
};

template <class T> class PerMessageSource : public ::testing::Test {};
using message_types = ::testing::Types<reading, frame>;
TYPED_TEST_SUITE(PerMessageSource, message_types);

TYPED_TEST(PerMessageSource, FillsItsRunWhateverItsLength) {
  for (const std::size_t room : {1u, 15u, 16u, 17u, 100u}) {
    source_run<TypeParam> s;
    s.run(room, [](std::uint32_t n, auto&) -> std::optional<TypeParam> { return made<TypeParam>(n); });
    EXPECT_EQ(s.progress.made, room);
    EXPECT_FALSE(s.progress.ended);
    s.expect_made(room);
  }
}

TYPED_TEST(PerMessageSource, EndsItsStreamBetweenCopies) {
  source_run<TypeParam> s;
  s.run(100, [](std::uint32_t n, auto&) -> std::optional<TypeParam> {
    if (n == 37) return std::nullopt;
    return made<TypeParam>(n);
  });
  EXPECT_TRUE(s.progress.ended);
  EXPECT_EQ(s.progress.made, 37u);
  s.expect_made(37);
}

// What was made before a throw is in the run (the stage pushes it), the kept messages included.
TYPED_TEST(PerMessageSource, AThrowLeavesWhatWasMadeBeforeItInTheRun) {
  source_run<TypeParam> s;
  EXPECT_THROW(s.run(100,
                     [](std::uint32_t n, auto&) -> std::optional<TypeParam> {
                       if (n == 37) throw std::runtime_error("sensor unplugged");
                       return made<TypeParam>(n);
                     }),
               std::runtime_error);
  EXPECT_EQ(s.progress.made, 37u);
  s.expect_made(37);
}

// A stop from inside the function (as pipeline::stop marks it): the message that call returns is
// not passed on, and no call follows.
TYPED_TEST(PerMessageSource, AStopFromInsideEndsTheRunBeforeThatCallsMessage) {
  source_run<TypeParam> s;
  s.run(100, [](std::uint32_t n, auto& run) -> std::optional<TypeParam> {
    if (n == 20) {
      run.stop = true;
      run.progress.stopped_inside = true;
    }
    return made<TypeParam>(n);
  });
  EXPECT_EQ(s.calls, 21u);
  EXPECT_EQ(s.progress.made, 20u);
  s.expect_made(20);
}

// A stop from another thread: the message of the call that saw it is the run's last.
TYPED_TEST(PerMessageSource, AStopFromElsewhereEndsTheRunAfterTheMessageItIsOn) {
  source_run<TypeParam> s;
  s.run(100, [](std::uint32_t n, auto& run) -> std::optional<TypeParam> {
    if (n == 20) run.stop = true;
    return made<TypeParam>(n);
  });
  EXPECT_EQ(s.calls, 21u);
  EXPECT_EQ(s.progress.made, 21u);
  s.expect_made(21);
}

} // namespace
