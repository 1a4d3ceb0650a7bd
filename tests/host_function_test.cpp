// The adapters between what users write per message and the runs host stages move
// (detail::per_message_source, per_message_transform, per_message_sink): every message made
// reaches the run, and every message of a run reaches the function, in order and intact, however
// the run ends (room filled, the stream's end, a throw, a stop from inside the function), also
// where the source builds its function's results in the run's slots (their flags spill into the
// next slot, never past the run) and where sinks and transforms copy them in by blocks.

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
  std::array<std::uint32_t, 1023> words; // 4 KiB: copied by blocks of one
};
static_assert(source_spill<reading> == 1 && source_spill<frame> == 1);
static_assert(read_block<reading> == 64 && read_block<frame> == 1);

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

// Runs a per-message source over a run of `room` slots `offset` bytes into its buffer (an offset
// not a multiple of the message's alignment: a run the results cannot be built in), followed by
// a guard; `at(n)` says what its n-th call does.
template <class T> struct source_run {
  static constexpr std::size_t guard = 64;
  std::vector<std::byte> out;
  std::size_t offset = 0, room = 0;
  run_progress progress;
  std::atomic<bool> stop{false};
  std::uint32_t calls = 0;

  template <class At> void run(std::size_t slots, At at, std::size_t at_offset = 0) {
    room = slots;
    offset = at_offset;
    out.assign(offset + room * sizeof(T) + guard, std::byte{0xee});
    progress.stopped = &stop;
    auto gen = per_message_source<T>([&]() -> std::optional<T> { return at(calls++, *this); });
    gen(out.data() + offset, room, progress);
  }
  /// The run's first `n` messages are messages 0..n-1, and nothing outside the run was written
  /// (the slots after the messages made are the run's until it is pushed).
  void expect_made(std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      T m;
      std::memcpy(&m, out.data() + offset + i * sizeof(T), sizeof(T));
      ASSERT_TRUE(same(m, made<T>(static_cast<std::uint32_t>(i)))) << "message " << i << " of " << n;
    }
    const auto untouched = [&](std::size_t from, std::size_t to) {
      for (std::size_t b = from; b < to; ++b)
        ASSERT_EQ(out[b], std::byte{0xee}) << "byte " << b << " outside the run of " << room << " was written";
    };
    untouched(0, offset);
    untouched(offset + room * sizeof(T), out.size());
  }
};

template <class T> class PerMessageSource : public ::testing::Test {};
using message_types = ::testing::Types<reading, frame>;
TYPED_TEST_SUITE(PerMessageSource, message_types);

TYPED_TEST(PerMessageSource, FillsItsRunWhateverItsLengthAndAlignment) {
  for (const std::size_t offset : {0u, 1u})
    for (const std::size_t room : {1u, 2u, 15u, 16u, 17u, 100u}) {
      source_run<TypeParam> s;
      s.run(
          room, [](std::uint32_t n, auto&) -> std::optional<TypeParam> { return made<TypeParam>(n); }, offset);
      EXPECT_EQ(s.progress.made, room);
      EXPECT_FALSE(s.progress.ended);
      s.expect_made(room);
    }
}

// Also at the run's last slot, which copies a local result in.
TYPED_TEST(PerMessageSource, EndsItsStreamWhereItsFunctionSays) {
  for (const std::uint32_t end : {0u, 37u, 98u, 99u}) {
    source_run<TypeParam> s;
    s.run(100, [end](std::uint32_t n, auto&) -> std::optional<TypeParam> {
      if (n == end) return std::nullopt;
      return made<TypeParam>(n);
    });
    EXPECT_TRUE(s.progress.ended);
    EXPECT_EQ(s.progress.made, end);
    s.expect_made(end);
  }
}

// What was made before a throw is in the run (the stage pushes it).
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

// Runs a per-message sink (or transform, `step`: seq + 1000, odd ones dropped where `drops`) over
// messages 0..n-1; `at(k, run)` is what its k-th call does besides checking its message.
template <class T> struct reading_run {
  std::vector<std::byte> in, out;
  run_progress progress;
  std::atomic<bool> stop{false};
  std::vector<std::size_t> taken_in_call; // progress.taken as each call saw it
  std::size_t wrong = 0;                  // calls whose message was not the next one, intact

  explicit reading_run(std::size_t n) : in(n * sizeof(T)), out(n * sizeof(T), std::byte{0xee}) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const T m = made<T>(i);
      std::memcpy(in.data() + i * sizeof(T), &m, sizeof(T));
    }
    progress.stopped = &stop;
  }
  template <class At> void look(const T& m, At& at) {
    const auto k = static_cast<std::uint32_t>(taken_in_call.size());
    if (!same(m, made<T>(k))) ++wrong;
    taken_in_call.push_back(progress.taken);
    at(k, *this);
  }
  template <class At> void sink(At at) {
    auto consume = per_message_sink<T>([&](const T& m) { look(m, at); });
    consume(in.data(), in.size() / sizeof(T), progress);
  }
  template <class At> void transform(bool drops, At at) {
    auto step = per_message_transform<T, T>([&](const T& m) -> std::optional<T> {
      look(m, at);
      if (drops && m.seq % 2 == 1) return std::nullopt;
      return made<T>(m.seq + 1000);
    });
    step(in.data(), in.size() / sizeof(T), out.data(), progress);
  }
  /// Every call saw the messages before it taken, and the first `n` results are those of the
  /// messages kept (all, or the even ones); the slot after them is untouched.
  void expect_made(std::size_t n, bool drops = false) const {
    EXPECT_EQ(wrong, 0u);
    for (std::size_t k = 0; k < taken_in_call.size(); ++k)
      ASSERT_EQ(taken_in_call[k], k);
    for (std::size_t i = 0; i < n; ++i) {
      T m;
      std::memcpy(&m, out.data() + i * sizeof(T), sizeof(T));
      const auto seq = static_cast<std::uint32_t>(drops ? 2 * i : i);
      ASSERT_TRUE(same(m, made<T>(seq + 1000))) << "result " << i << " of " << n;
    }
    if (n * sizeof(T) < out.size()) {
      EXPECT_EQ(out[n * sizeof(T)], std::byte{0xee}) << "a slot past the run was written";
    }
  }
};

template <class T> class PerMessageReader : public ::testing::Test {};
TYPED_TEST_SUITE(PerMessageReader, message_types);

const auto only_look = [](std::uint32_t, auto&) {};

// Lengths about a block of 64 small messages (a 4 KiB frame is a block of its own).
TYPED_TEST(PerMessageReader, SeesEveryMessageInOrderWhateverItsLength) {
  for (const std::size_t n : {1u, 63u, 64u, 65u, 129u}) {
    reading_run<TypeParam> sink(n);
    sink.sink(only_look);
    EXPECT_EQ(sink.taken_in_call.size(), n);
    EXPECT_EQ(sink.progress.taken, n);
    sink.expect_made(0);
    for (const bool drops : {false, true}) {
      reading_run<TypeParam> step(n);
      step.transform(drops, only_look);
      EXPECT_EQ(step.progress.taken, n);
      EXPECT_EQ(step.progress.made, drops ? (n + 1) / 2 : n);
      step.expect_made(step.progress.made, drops);
    }
  }
}

// A throw: the messages before the one that threw are taken (that one is at risk), the results
// before it made.
TYPED_TEST(PerMessageReader, AThrowLeavesTheMessagesBeforeItTaken) {
  const auto throw_at_70 = [](std::uint32_t k, auto&) {
    if (k == 70) throw std::runtime_error("disk full");
  };
  reading_run<TypeParam> sink(100);
  EXPECT_THROW(sink.sink(throw_at_70), std::runtime_error);
  EXPECT_EQ(sink.progress.taken, 70u);
  sink.expect_made(0);
  reading_run<TypeParam> step(100);
  EXPECT_THROW(step.transform(false, throw_at_70), std::runtime_error);
  EXPECT_EQ(step.progress.taken, 70u);
  EXPECT_EQ(step.progress.made, 70u);
  step.expect_made(70);
}

// A stop ends the run after the message it is on; from inside the function, that call's result
// is not passed on.
TYPED_TEST(PerMessageReader, AStopEndsTheRunAfterTheMessageItIsOn) {
  for (const bool inside : {false, true}) {
    const auto stop_at_70 = [inside](std::uint32_t k, auto& run) {
      if (k != 70) return;
      run.stop = true;
      run.progress.stopped_inside = inside;
    };
    reading_run<TypeParam> sink(100);
    sink.sink(stop_at_70);
    EXPECT_EQ(sink.taken_in_call.size(), 71u);
    EXPECT_EQ(sink.progress.taken, 71u);
    sink.expect_made(0);
    reading_run<TypeParam> step(100);
    step.transform(false, stop_at_70);
    EXPECT_EQ(step.taken_in_call.size(), 71u);
    EXPECT_EQ(step.progress.taken, 71u);
    EXPECT_EQ(step.progress.made, inside ? 70u : 71u);
    step.expect_made(step.progress.made);
  }
}

} // namespace
