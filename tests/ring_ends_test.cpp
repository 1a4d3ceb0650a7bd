// A ring's host ends after the other side of the same end was used elsewhere: a batched kernel's
// driver consumes by publishing the tail, a driver or a device kernel produces by publishing the
// head, and the ring's owner pushes or pops afterwards (a stopped kernel's input, a backlog handed
// back). The owner's cached view of the other counter is then older than a lap: every host push
// and pop, one message or a run, must look again instead of trusting it.

#include <ringpipe/ring.hpp>

#include "ring_test_message.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using ring_testing::check_of;
using ring_testing::msg;

// Pushes seq `from` .. `to` - 1 as a producer elsewhere does: into the slots, then the head.
void push_elsewhere(ring<msg>& r, std::uint32_t from, std::uint32_t to) {
  for (std::uint32_t s = from; s < to; ++s) {
    const msg m{s, check_of(s)};
    std::memcpy(r.buffer().slot(s), &m, sizeof m);
  }
  r.buffer().publish_head(to);
}

} // namespace

TEST(RingEnds, PopAfterTheTailMovedElsewhereReturnsOnlyWhatIsQueued) {
  ring<msg> r(16);
  std::vector<msg> out(16);
  for (std::uint32_t s = 0; s < 4; ++s)
    ASSERT_TRUE(r.try_push({s, check_of(s)}));
  ASSERT_EQ(r.pop_n(std::span(out).first(1)), 1u); // the owner's cached head: 4
  for (std::uint32_t s = 4; s < 12; ++s)
    ASSERT_TRUE(r.try_push({s, check_of(s)}));
  r.buffer().publish_tail(10); // consumed elsewhere: 1..9
  ASSERT_EQ(r.pop_n(out), 2u);
  EXPECT_EQ(out[0].seq, 10u);
  EXPECT_EQ(out[1].seq, 11u);
}

// The same for pops of one message: try_pop, and pop, which ends at the stream's end.
TEST(RingEnds, APopOfOneMessageAfterTheTailMovedElsewhereReturnsOnlyWhatIsQueued) {
  for (const bool blocking : {false, true}) {
    SCOPED_TRACE(blocking ? "pop" : "try_pop");
    ring<msg> r(16);
    for (std::uint32_t s = 0; s < 4; ++s)
      ASSERT_TRUE(r.try_push({s, check_of(s)}));
    msg m{};
    ASSERT_TRUE(r.try_pop(m)); // the owner's cached head: 4
    for (std::uint32_t s = 4; s < 12; ++s)
      ASSERT_TRUE(r.try_push({s, check_of(s)}));
    r.buffer().publish_tail(10); // consumed elsewhere: 1..9
    r.close();
    std::vector<std::uint32_t> got;
    while (blocking ? r.pop(m, 1s) : r.try_pop(m)) {
      EXPECT_EQ(m.check, check_of(m.seq));
      got.push_back(m.seq);
      ASSERT_LE(got.size(), 2u) << "popped past the head";
    }
    EXPECT_EQ(got, (std::vector<std::uint32_t>{10, 11}));
    EXPECT_TRUE(r.drained());
  }
}

// A producer elsewhere filled the ring after the owner's last look at the tail, with a whole
// lap consumed in between: no host push (one message, a run, a window) overwrites a queued message.
TEST(RingEnds, APushAfterTheHeadMovedElsewhereNeverOverwritesAQueuedMessage) {
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE("form " + std::to_string(form));
    ring<msg> r(4);
    ASSERT_TRUE(r.try_push({0, check_of(0)})); // the owner's cached tail: 0
    push_elsewhere(r, 1, 4);
    r.buffer().publish_tail(4); // a lap consumed elsewhere
    push_elsewhere(r, 4, 8);    // and the ring filled again: 4..7 queued
    const msg extra{99, check_of(99)};
    switch (form) {
    case 0: EXPECT_FALSE(r.try_push(extra)); break;
    case 1: {
      std::error_code ec;
      EXPECT_FALSE(r.push(extra, 1ms, ec));
      EXPECT_EQ(ec, make_error_code(errc::timeout));
      break;
    }
    case 2: EXPECT_EQ(r.push_n(std::span(&extra, 1)), 0u); break;
    default: EXPECT_TRUE(r.write_window(4).empty()); break;
    }
    msg m{};
    for (std::uint32_t s = 4; s < 8; ++s) {
      ASSERT_TRUE(r.try_pop(m));
      EXPECT_EQ(m.seq, s) << "a queued message was overwritten";
    }
    EXPECT_FALSE(r.try_pop(m));
  }
}
