// An ordered farm's early results (src/actor/reorder_buffer.hpp): kept by number, given back in
// order, across the ring's wrap and while it grows, with every byte of each message kept.
#include "../src/actor/reorder_buffer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

using ringpipe::detail::reorder_buffer;

namespace {

using message = std::array<std::byte, 24>; // a size no power of two divides evenly into slots of 64

message message_of(std::uint64_t seq) {
  message m{};
  for (std::size_t k = 0; k < m.size(); ++k)
    m[k] = static_cast<std::byte>((seq * 31 + k) & 0xff);
  return m;
}

// Passes on everything that is next in order; returns how many.
std::size_t drain(reorder_buffer& b, std::vector<std::uint64_t>& passed) {
  std::size_t n = 0;
  for (const std::byte* kept = b.next_kept(); kept != nullptr; kept = b.next_kept(), ++n) {
    const auto want = message_of(b.next());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), kept)) << "result " << b.next() << " changed while kept";
    passed.push_back(b.next());
    b.take_next();
  }
  return n;
}

TEST(ReorderBuffer, GivesBackInOrderWhateverOrderResultsCameIn) {
  // 20,000 results, shuffled within windows of 3,000 (a slow replica's share arriving late), so
  // that the buffer wraps many times and holds thousands at once.
  constexpr std::uint64_t count = 20000, window = 3000;
  std::vector<std::uint64_t> order(count);
  for (std::uint64_t i = 0; i < count; ++i)
    order[i] = i;
  std::mt19937 rng(7);
  for (std::uint64_t from = 0; from < count; from += window)
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(from),
                 order.begin() + static_cast<std::ptrdiff_t>(std::min(count, from + window)), rng);
  reorder_buffer b;
  std::vector<std::uint64_t> passed;
  std::size_t most = 0;
  for (const auto seq : order) {
    if (seq == b.next()) { // the next in order goes straight on, as the merger passes it
      passed.push_back(seq);
      b.skip();
    } else {
      const auto m = message_of(seq);
      b.put(seq, m);
    }
    most = std::max(most, b.size());
    drain(b, passed);
  }
  EXPECT_TRUE(b.empty());
  ASSERT_EQ(passed.size(), count);
  for (std::uint64_t i = 0; i < count; ++i)
    ASSERT_EQ(passed[i], i);
  EXPECT_GT(most, 64u) << "the buffer never had to grow: the test does not exercise growth";
}

TEST(ReorderBuffer, KeepsNothingBeforeTheFirstResultAndGrowsToAFarNumber) {
  reorder_buffer b;
  EXPECT_EQ(b.next_kept(), nullptr);
  const auto far = message_of(100000);
  b.put(100000, far); // far beyond 64 slots: grows to hold it
  EXPECT_EQ(b.next_kept(), nullptr);
  for (std::uint64_t i = 0; i < 100000; ++i)
    b.skip();
  ASSERT_NE(b.next_kept(), nullptr);
  EXPECT_TRUE(std::equal(far.begin(), far.end(), b.next_kept()));
  b.take_next();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.next(), 100001u);
}

// Growing keeps what it holds, also where the kept numbers wrap around the old ring's end.
TEST(ReorderBuffer, GrowingKeepsWhatItHoldsAcrossTheWrap) {
  reorder_buffer b;
  for (std::uint64_t i = 0; i < 50; ++i) // the next number at 50 of 64 slots: kept ones will wrap
    b.skip();
  std::vector<std::uint64_t> kept{51, 60, 70, 100}; // 70 and 100 past the wrap; 100 grows it to 128
  kept.push_back(400);                              // and again to 512, holding four
  for (const auto seq : kept)
    b.put(seq, message_of(seq));
  std::vector<std::uint64_t> passed;
  while (b.next() <= 400)
    if (drain(b, passed) == 0) b.skip();
  EXPECT_EQ(passed, kept);
  EXPECT_TRUE(b.empty());
}

} // namespace
