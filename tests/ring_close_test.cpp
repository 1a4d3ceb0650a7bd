// A closed ring takes nothing more: the stream has ended, and a consumer that has seen the end
// would never take a message pushed after it. Every push says so instead of losing the message:
// the calls that do not wait move nothing, the blocking ones fail with errc::closed naming the
// ring, at once, also where they were asleep on a full ring when another thread closed it.

#include <ringpipe/ring.hpp>

#include "ring_test_message.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ring_testing::check_of;
using ring_testing::msg;

TEST(RingClose, PushesAfterTheCloseMoveNothingAndSaySo) {
  ring<msg> r(8, {"ended"});
  ASSERT_TRUE(r.try_push({0, check_of(0)}));
  ASSERT_TRUE(r.try_push({1, check_of(1)}));
  r.close();

  EXPECT_FALSE(r.try_push({2, check_of(2)}));
  const std::vector<msg> more{{2, check_of(2)}, {3, check_of(3)}};
  EXPECT_EQ(r.push_n(more), 0u);
  EXPECT_TRUE(r.write_window(4).empty());
  try {
    r.push({2, check_of(2)}, 60s);
    FAIL() << "a push after the close returned";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::closed));
    EXPECT_NE(std::string(e.what()).find("push to ring 'ended' after it was closed"), std::string::npos) << e.what();
  }
  std::error_code ec;
  EXPECT_FALSE(r.push({2, check_of(2)}, 60s, ec));
  EXPECT_EQ(ec, make_error_code(errc::closed));
  EXPECT_EQ(r.push_all(std::span<const msg>(more), 60s, ec), 0u);
  EXPECT_EQ(ec, make_error_code(errc::closed));

  // The consumer gets what came before the close, in order, then the end.
  msg m{};
  for (std::uint32_t s = 0; s < 2; ++s) {
    ASSERT_TRUE(r.pop(m, 1s));
    EXPECT_EQ(m.seq, s);
    EXPECT_EQ(m.check, check_of(s));
  }
  EXPECT_FALSE(r.pop(m, 1s)) << "end of stream";
  EXPECT_EQ(r.buffer().pushed(), 2u);
}

// A producer asleep in push on a full ring, closed by another thread: it fails with errc::closed
// as the close happens, not when its timeout runs out, and its message is not in the ring.
TEST(RingClose, APushAsleepOnAFullRingFailsWhenAnotherThreadClosesIt) {
  for (const bool run : {false, true}) {
    SCOPED_TRACE(run ? "push_all" : "push");
    ring<msg> r(1, {"full"});
    ASSERT_TRUE(r.try_push({0, check_of(0)}));
    std::error_code ec;
    std::size_t pushed = 99;
    std::chrono::steady_clock::duration waited{};
    std::thread producer([&] {
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<msg> next{{1, check_of(1)}};
      pushed = run ? r.push_all(std::span<const msg>(next), 60s, ec) : (r.push(next[0], 60s, ec) ? 1 : 0);
      waited = std::chrono::steady_clock::now() - t0;
    });
    std::this_thread::sleep_for(200ms); // long enough for the push to reach its longest sleeps
    r.close();
    producer.join();
    EXPECT_EQ(pushed, 0u);
    EXPECT_EQ(ec, make_error_code(errc::closed));
    EXPECT_LT(waited, 30s) << "the close did not wake the push; its 60 s timeout ended it";
    msg m{};
    ASSERT_TRUE(r.pop(m, 1s));
    EXPECT_EQ(m.seq, 0u);
    EXPECT_FALSE(r.pop(m, 1s)) << "only the message pushed before the close";
  }
}
