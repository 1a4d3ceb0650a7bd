// A ring's producer offers its next step to the application thread that waits on the ring
// (ring_buffer::offer_help): a batched kernel's proxy whose launch completed lets that thread
// publish the results itself instead of waking an io thread that would then wake it. Here the
// producer is the test: its "step" publishes the messages it has pending, on whichever thread
// takes it, exactly once each.
#include <ringpipe/ring.hpp>

#include "test_message.hpp"
#include "wait_for.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::wait_for;

namespace {

using msg16 = test_message<16>;

// Messages made ready by the producer and pushed by whoever steps: the consumer's help or the
// producer itself, one at a time (the proxy's steps are exclusive the same way). A push that
// finds the ring full leaves the rest to the next step, which a proxy's poller takes by itself
// and this producer does not: its callers keep the ring from filling.
struct pending_producer {
  explicit pending_producer(ring<msg16>& r) : out(r) {}
  ring<msg16>& out;
  std::mutex stepping;
  std::uint32_t ready = 0, pushed = 0;
  std::atomic<unsigned> steps_on_consumer{0};
  std::atomic<std::thread::id> consumer{};
  unsigned full_pushes = 0;

  bool step() {
    std::lock_guard lock(stepping);
    if (std::this_thread::get_id() == consumer.load()) ++steps_on_consumer;
    bool moved = false;
    for (; pushed < ready; ++pushed, moved = true)
      if (!out.try_push(make_test_message<16>(pushed))) {
        ++full_pushes;
        break;
      }
    return moved;
  }
  void make_ready() {
    std::lock_guard lock(stepping);
    ++ready;
  }
};

// The consumer sleeps on the empty ring; the offer wakes it and it publishes the message itself.
TEST(ConsumerHelp, AWaitingConsumerTakesTheOfferOnItsOwnThread) {
  ring<msg16> out(64, {"helped"});
  pending_producer producer(out);
  out.buffer().set_consumer_help([&] { return producer.step(); });
  msg16 got{};
  bool popped = false;
  std::thread consumer([&] { popped = out.pop(got, 10s); });
  producer.consumer = consumer.get_id();
  // The consumer asks for a push's wake only when it goes to sleep.
  ASSERT_TRUE(wait_for([&] { return out.buffer().push_wake_wanted(); }, 10s));
  producer.make_ready();
  EXPECT_TRUE(out.buffer().offer_help()) << "ring '" << out.name() << "': a waiting consumer was not told";
  consumer.join();
  ASSERT_TRUE(popped);
  EXPECT_EQ(got.seq, 0u);
  EXPECT_EQ(producer.steps_on_consumer.load(), 1u) << "the message was not published on the consumer's thread";
}

// With nobody waiting, the offer tells the producer to step itself; withdrawn by that step, it
// runs nothing more on the next consumer.
TEST(ConsumerHelp, AnOfferNobodyWaitsForIsTheProducersToStep) {
  ring<msg16> out(64, {"unhelped"});
  pending_producer producer(out);
  producer.consumer = std::this_thread::get_id();
  std::atomic<unsigned> helps{0};
  out.buffer().set_consumer_help([&] {
    ++helps;
    return producer.step();
  });
  producer.make_ready();
  ASSERT_FALSE(out.buffer().offer_help());
  out.buffer().withdraw_help();
  producer.consumer = std::thread::id{};
  ASSERT_TRUE(producer.step());
  msg16 got{};
  ASSERT_TRUE(out.pop(got, 10s));
  EXPECT_EQ(got.seq, 0u);
  EXPECT_FALSE(out.try_pop(got));
  EXPECT_EQ(helps.load(), 0u);
  // Not withdrawn (a step that never came): the consumer's next wait takes it at its first look.
  producer.consumer = std::this_thread::get_id();
  producer.make_ready();
  ASSERT_FALSE(out.buffer().offer_help());
  ASSERT_TRUE(out.pop(got, 10s));
  EXPECT_EQ(got.seq, 1u);
  EXPECT_EQ(helps.load(), 1u);
  EXPECT_EQ(producer.steps_on_consumer.load(), 1u);
}

// Offers race the consumer's waits (ThreadSanitizer runs this test): whichever side steps, every
// message arrives once and in order, and a pop never waits for one that is ready.
TEST(ConsumerHelp, OffersRacingWaitsLoseAndRepeatNothing) {
  ring<msg16> out(64, {"raced"});
  pending_producer producer(out);
  out.buffer().set_consumer_help([&] { return producer.step(); });
  constexpr std::uint32_t messages = 20000;
  std::thread consumer([&] {
    msg16 got{};
    for (std::uint32_t i = 0; i < messages; ++i) {
      ASSERT_TRUE(out.pop(got, 10s)) << "message " << i << " never came";
      ASSERT_EQ(got.seq, i);
    }
  });
  producer.consumer = consumer.get_id();
  for (std::uint32_t i = 0; i < messages; ++i) {
    // Made ready, not yet popped: offers the consumer has not taken count too (the ring's fill
    // alone let them pile up past its capacity, and the step that took them left the rest).
    while (producer.ready - out.buffer().popped() > 32)
      std::this_thread::yield();
    producer.make_ready();
    if (!out.buffer().offer_help()) {
      out.buffer().withdraw_help();
      producer.step();
    }
    if (i % 64 == 0) std::this_thread::sleep_for(50us); // lets the consumer fall asleep now and then
  }
  consumer.join();
  EXPECT_EQ(out.buffer().pushed(), messages);
  EXPECT_EQ(out.buffer().popped(), messages);
  EXPECT_EQ(producer.full_pushes, 0u) << "the test let the ring fill: a lost offer and a full ring look alike";
}

} // namespace
