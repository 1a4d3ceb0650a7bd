// A host push wakes the consumer that sleeps on an empty ring: the ring calls the consumer's wake
// once per request (ring_buffer::want_push_wake), and a kernel's proxy asks for it when its kernel
// has nothing in flight and nothing queued (a batched or parked kernel waiting for input), so the
// next message is launched at once instead of at the proxy's next poll, up to 1 ms later. A
// resident kernel polls the ring itself and never asks. An application thread that pushes into
// an idle batched kernel launches it, and one that waits on its output publishes the launch.
#include <ringpipe/kernel.hpp>

#include "device_fixture.hpp"
#include "test_message.hpp"
#include "wait_for.hpp"

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::wait_for;

namespace {

using msg16 = test_message<16>;

TEST(PushWake, OnePushOrCloseWakesOncePerRequest) {
  ring_buffer r(8, sizeof(msg16), {"woken"});
  int wakes = 0;
  r.set_push_wake([&] { ++wakes; });
  const auto m = make_test_message<16>(0);
  ASSERT_TRUE(r.try_push_bytes(&m));
  EXPECT_EQ(wakes, 0) << "nobody asked";
  r.want_push_wake();
  ASSERT_TRUE(r.try_push_bytes(&m));
  ASSERT_TRUE(r.try_push_bytes(&m));
  EXPECT_EQ(wakes, 1);
  EXPECT_FALSE(r.push_wake_wanted());
  r.want_push_wake();
  EXPECT_EQ(r.push_n_bytes(&m, 1), 1u);
  EXPECT_EQ(wakes, 2);
  r.want_push_wake();
  auto window = r.write_window(1);
  ASSERT_EQ(window.size(), sizeof(msg16));
  r.commit_push(0);
  EXPECT_EQ(wakes, 2) << "an empty commit pushes nothing";
  r.commit_push(1);
  EXPECT_EQ(wakes, 3);
  r.want_push_wake();
  r.close();
  EXPECT_EQ(wakes, 4) << "the end of the stream wakes the consumer too";
}

// A kernel started again on the same rings gives the ring its own wake while the producer may be
// pushing and taking the last consumer's request (ThreadSanitizer runs this test).
TEST(PushWake, ANewConsumerReplacesTheWakeWhileAProducerPushes) {
  ring_buffer r(1024, sizeof(msg16), {"replaced"});
  std::atomic<int> first{0}, second{0};
  r.set_push_wake([&] { ++first; });
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    const auto m = make_test_message<16>(0);
    while (!stop.load())
      if (!r.try_push_bytes(&m)) std::this_thread::yield();
  });
  msg16 got{};
  for (int i = 0; i < 2000; ++i) {
    r.want_push_wake();
    if (i == 1000) r.set_push_wake([&] { ++second; });
    while (r.try_pop_bytes(&got)) {
    }
    std::this_thread::yield();
  }
  stop.store(true);
  producer.join();
  const int before = first.load(), after = second.load();
  r.want_push_wake();
  const auto m = make_test_message<16>(1);
  while (!r.try_push_bytes(&m))
    ASSERT_TRUE(r.try_pop_bytes(&got));
  EXPECT_EQ(first.load(), before) << "the replaced wake was called";
  EXPECT_EQ(second.load(), after + 1);
}

class PushWakeKernelTest : public ringpipe::testing::device_test {
protected:
  // Every io thread of the runtime blocked in a post until release() (or the end of the scope).
  class io_threads_held {
  public:
    io_threads_held() {
      for (unsigned i = 0; i < rt().thread_limit(); ++i)
        boost::asio::post(rt().io(), [held = held_, done = released_] {
          ++*held;
          done.wait();
        });
    }
    ~io_threads_held() { release(); }
    io_threads_held(const io_threads_held&) = delete;
    io_threads_held& operator=(const io_threads_held&) = delete;
    bool all() {
      return wait_for([this] { return held_->load() == rt().threads(); }, 10s);
    }
    void release() {
      if (!released_now_.exchange(true)) release_.set_value();
    }

  private:
    std::shared_ptr<std::atomic<unsigned>> held_ = std::make_shared<std::atomic<unsigned>>(0); // outlives late posts
    std::promise<void> release_;
    std::shared_future<void> released_ = release_.get_future().share();
    std::atomic<bool> released_now_{false};
  };
  // test_map between two rings of the first device, 64 slots unless said, started in `mode`.
  struct map_kernel {
    ring<msg16> in, out;
    ring_kernel<msg16, msg16> k;
    explicit map_kernel(kernel_mode mode, std::uint32_t slots = 64)
        : in(topo()[0], slots, {"in"}), out(topo()[0], slots, {"out"}),
          k(rt(), topo()[0], {test_stages_source(16), "test_map", ""}, in_mode(mode)) {
      k.start(in, out);
    }
    // One message through, then the proxy idle: it asked ring 'in' for the next push's wake.
    bool idle_after_one(msg16& m) {
      return in.try_push(make_test_message<16>(0)) && out.pop(m, 10s) &&
             wait_for([this] { return in.buffer().push_wake_wanted(); }, 10s);
    }
    static kernel_options in_mode(kernel_mode mode) {
      kernel_options options;
      options.mode = mode;
      return options;
    }
  };
};

// Each message is pushed after the proxy has asked: the ring wakes it, the batch runs, and the
// proxy asks again once the kernel is idle. Order and count checked.
TEST_F(PushWakeKernelTest, AnIdleBatchedKernelAsksAndEveryPushIsRun) {
  map_kernel run(kernel_mode::batched);
  auto &in = run.in, &out = run.out;
  auto& k = run.k;
  for (std::uint32_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(wait_for([&] { return in.buffer().push_wake_wanted(); }, 10s))
        << "the proxy of idle kernel '" << k.name() << "' did not ask ring 'in' for a wake (message " << i << ")";
    // No look at the flag after the push: an idle step of the proxy that began before it may
    // ask again (and then finds the message and wakes itself).
    ASSERT_TRUE(in.try_push(make_test_message<16>(i)));
    msg16 m{};
    ASSERT_TRUE(out.pop(m, 10s));
    EXPECT_EQ(m.seq, i);
    EXPECT_EQ(m.check, test_check_after(i, 1));
  }
  k.stop(30s);
  EXPECT_EQ(k.stats().msgs_out, 20u);
}

// An application's push into an idle kernel launches it on the pushing thread instead of waking an
// io thread to do it (one wake of an idle core less per sporadic message): with every io thread
// of the runtime held, the launch is in before the push returns, and the result comes once the
// threads are free again (the proxy publishes it there).
TEST_F(PushWakeKernelTest, AnApplicationsPushLaunchesAnIdleKernelOnItsOwnThread) {
  map_kernel run(kernel_mode::batched);
  auto &in = run.in, &out = run.out;
  auto& k = run.k;
  msg16 m{};
  ASSERT_TRUE(run.idle_after_one(m));
  io_threads_held held;
  ASSERT_TRUE(held.all());
  const auto launches = k.stats().launches;
  ASSERT_TRUE(in.try_push(make_test_message<16>(1)));
  EXPECT_EQ(k.stats().launches, launches + 1)
      << "kernel '" << k.name() << "' was not launched by the push into ring 'in' with every io thread held";
  held.release();
  ASSERT_TRUE(out.pop(m, 10s));
  EXPECT_EQ(m.seq, 1u);
  EXPECT_EQ(m.check, test_check_after(1, 1));
  k.stop(30s);
  EXPECT_EQ(k.stats().msgs_out, 2u);
}

// The application thread that waits on an idle batched kernel's output publishes the completed
// launch itself (ring_buffer::offer_help) instead of waiting for an io thread to: with every io
// thread of the runtime held, messages go in and come out, each launch made by the push and its
// results published by the pop. Rings as wide as a pipeline's, so that the host publishes (as
// spans where the device shares memory; a batched ring kernel on narrow SVM rings publishes on
// the device, and its return is seen by the proxy's own poll).
TEST_F(PushWakeKernelTest, AnApplicationWaitingOnTheOutputPublishesTheLaunch) {
  map_kernel run(kernel_mode::batched, 4096);
  auto &in = run.in, &out = run.out;
  auto& k = run.k;
  msg16 m{};
  ASSERT_TRUE(run.idle_after_one(m));
  io_threads_held held;
  ASSERT_TRUE(held.all());
  for (std::uint32_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(in.try_push(make_test_message<16>(i)));
    std::error_code ec;
    const bool popped = out.pop(m, 5s, ec);
    if (!popped) held.release();
    ASSERT_TRUE(popped) << "message " << i << " of kernel '" << k.name()
                        << "' was not published to the application waiting on ring 'out' with every io thread held";
    EXPECT_EQ(m.seq, i);
    EXPECT_EQ(m.check, test_check_after(i, 1));
  }
  held.release();
  k.stop(30s);
  EXPECT_EQ(k.stats().msgs_out, 4u);
}

// Idle a while, the proxy sleeps on its input's promise (poll_result::dormant: a timer of 250 ms
// as a safety net only, where the process-wide fence is offered) and the push still wakes it: a
// missed wake would wait out most of that timer, the pushes come 30 ms into the idle spell.
TEST_F(PushWakeKernelTest, AnIdleKernelAsleepOnItsPromiseIsWokenByThePush) {
  for (const auto mode : {kernel_mode::batched, kernel_mode::parked}) {
    if (!topo()[0].info().supports(mode)) continue;
    map_kernel run(mode);
    msg16 m{};
    ASSERT_TRUE(run.idle_after_one(m));
    auto fastest = std::chrono::steady_clock::duration::max();
    for (std::uint32_t i = 1; i <= 3; ++i) {
      std::this_thread::sleep_for(30ms);
      const auto pushed_at = std::chrono::steady_clock::now();
      ASSERT_TRUE(run.in.try_push(make_test_message<16>(i)));
      ASSERT_TRUE(run.out.pop(m, 10s)) << to_string(mode) << " kernel '" << run.k.name() << "'";
      fastest = std::min(fastest, std::chrono::steady_clock::now() - pushed_at);
      EXPECT_EQ(m.seq, i);
    }
    EXPECT_LT(fastest, 150ms) << to_string(mode) << " kernel '" << run.k.name()
                              << "' ran its messages at its safety net's timer, not at the push";
    run.k.stop(30s);
    EXPECT_EQ(run.k.stats().msgs_out, 4u);
  }
}

// Held by a full output (nobody pops it), the proxy asks the output for the next pop's wake and,
// idle a while, sleeps on its promise: the pops still wake it, so the queued messages come out at
// once, not at the safety net's 250 ms. Every message once, in order.
TEST_F(PushWakeKernelTest, AKernelHeldByAFullOutputIsWokenByThePops) {
  for (const auto mode : {kernel_mode::batched, kernel_mode::parked}) {
    if (!topo()[0].info().supports(mode)) continue;
    map_kernel run(mode);
    std::uint32_t pushed = 0, popped = 0;
    auto fastest = std::chrono::steady_clock::duration::max();
    for (int round = 0; round < 3; ++round) {
      std::error_code ec;
      while (run.in.push(make_test_message<16>(pushed), 20ms, ec))
        ++pushed;
      ASSERT_GT(pushed - popped, run.out.capacity()) << to_string(mode) << " kernel: its output is not full";
      ASSERT_TRUE(wait_for([&] { return run.out.buffer().pop_wake_wanted(); }, 10s))
          << to_string(mode) << " kernel '" << run.k.name() << "' held by a full output did not ask for a pop's wake";
      // Asleep on the promise for 250 ms at most (its safety net): the pops begin about 50 ms in.
      std::this_thread::sleep_for(30ms);
      const auto t0 = std::chrono::steady_clock::now();
      for (msg16 m{}; popped < pushed; ++popped) {
        ASSERT_TRUE(run.out.pop(m, 10s)) << to_string(mode) << " kernel: message " << popped;
        ASSERT_EQ(m.seq, popped) << "lost, repeated or reordered";
      }
      fastest = std::min(fastest, std::chrono::steady_clock::now() - t0);
    }
    EXPECT_LT(fastest, 150ms) << to_string(mode) << " kernel '" << run.k.name()
                              << "' ran its queued messages at its safety net's timer, not at the pops";
    run.k.stop(30s);
  }
}

// A parked kernel's launch writes its output on the device. Once it has returned, an application
// blocked in pop on that output sleeps on the ring's promise, and the next launch (the push's)
// wakes it to poll for the result: the result comes at once, not at the promised sleep's limit of
// 250 ms. Every message once, in order.
TEST_F(PushWakeKernelTest, AnApplicationAsleepOnAParkedKernelsOutputIsWokenByItsNextLaunch) {
  if (!topo()[0].info().supports(kernel_mode::parked))
    GTEST_SKIP() << "device '" << topo()[0].name() << "' runs no parked kernel (its launches write no shared ring)";
  map_kernel run(kernel_mode::parked);
  msg16 m{};
  ASSERT_TRUE(run.idle_after_one(m));
  auto fastest = std::chrono::steady_clock::duration::max();
  for (std::uint32_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(wait_for([&] { return !run.out.buffer().device_producer(); }, 10s))
        << "kernel '" << run.k.name() << "': its parked launch never returned, or ring 'out' still says a device "
        << "writes it";
    std::atomic<std::chrono::steady_clock::time_point> pushed_at{};
    std::thread producer([&] {
      std::this_thread::sleep_for(30ms); // the pop has slept its backoff out and promised
      pushed_at.store(std::chrono::steady_clock::now());
      EXPECT_TRUE(run.in.try_push(make_test_message<16>(i)));
    });
    ASSERT_TRUE(run.out.pop(m, 10s));
    fastest = std::min(fastest, std::chrono::steady_clock::now() - pushed_at.load());
    producer.join();
    EXPECT_EQ(m.seq, i);
  }
  EXPECT_LT(fastest, 150ms) << "the pop waited for its sleep's limit, not the parked kernel's next launch";
  run.k.stop(30s);
  EXPECT_EQ(run.k.stats().msgs_out, 4u);
}

// A resident kernel polls its ring on the device: its proxy has nothing to be woken for.
TEST_F(PushWakeKernelTest, AResidentKernelNeverAsks) {
  const auto& dev = topo()[0];
  if (!dev.info().supports(kernel_mode::persistent))
    GTEST_SKIP() << "device '" << dev.name() << "' runs no resident kernel";
  map_kernel run(kernel_mode::persistent);
  auto &in = run.in, &out = run.out;
  auto& k = run.k;
  ASSERT_TRUE(in.try_push(make_test_message<16>(0)));
  msg16 m{};
  ASSERT_TRUE(out.pop(m, 10s));
  // Long enough for the proxy to have stepped idle several times (its first sleeps are 40-80 us).
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(in.buffer().push_wake_wanted());
  k.stop(30s);
}

} // namespace
