// The rank's link thread with tasks that only count their turns (no MPI call, no mpirun): a
// thread waiting on a ring takes the engine's turns on its own thread, never while the engine's
// thread is taking a pass; the engine's thread stands down while a waiter helps, and takes the
// turns back once it leaves.

#include "../src/mpi/link_engine.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/ring.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

template <class Ready> bool within(std::chrono::nanoseconds limit, Ready&& ready) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// Counts turns by the thread that made it (the waiter) and by any other (the engine's). A turn
// on the engine's thread can be held until the test lets it go.
class counting_task final : public mpi::detail::engine_task {
public:
  explicit counting_task(std::thread::id waiter) : waiter_(waiter) {}
  bool turn() noexcept override {
    if (std::this_thread::get_id() == waiter_) {
      by_waiter.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    by_engine.fetch_add(1, std::memory_order_relaxed);
    if (hold.load(std::memory_order_acquire)) {
      held.store(true, std::memory_order_release);
      (void)within(10s, [&] { return !hold.load(std::memory_order_acquire); });
      held.store(false, std::memory_order_release);
    }
    return true; // always moving (a transfer under way): the engine's thread never paces itself
  }
  bool ended() const noexcept override { return end.load(std::memory_order_relaxed); }
  void retired() noexcept override { gone.store(true, std::memory_order_release); }
  std::chrono::nanoseconds idle_spin() const noexcept override { return 200us; }

  std::atomic<std::uint64_t> by_waiter{0}, by_engine{0};
  std::atomic<bool> hold{false}, held{false}, end{false}, gone{false};

private:
  std::thread::id waiter_;
};

TEST(LinkEngine, AThreadWaitingOnARingTakesTheTurnsAndTheEngineStandsDown) {
  counting_task task(std::this_thread::get_id());
  {
    mpi::detail::link_engine engine;
    engine.add(task);
    ASSERT_TRUE(within(10s, [&] { return task.by_engine.load() > 0; })) << "the engine's thread never turned its task";
    ASSERT_NE(detail::wait_helper().load(), nullptr) << "the engine offers no help to waiters";

    // A thread popping from an empty ring again and again (a ping-pong's waits): each wait takes
    // the engine's turns on its own thread instead of yielding, and the engine's thread, finding
    // a helper's pass less than 100 us old when it looks, naps instead of taking its own.
    ring_buffer empty(16, 8);
    std::byte m[8];
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (engine.stand_downs() == 0 && std::chrono::steady_clock::now() < until)
      EXPECT_FALSE(ring_buffer::wait_until([&] { return empty.pop_n_bytes(m, 1) == 1; }, 200us));
    EXPECT_GT(task.by_waiter.load(), 0u) << "the waiter did not take the engine's turns";
    EXPECT_GT(engine.stand_downs(), 0u) << "the engine's thread kept its turns beside a waiter that took them";

    const auto engine_after_wait = task.by_engine.load();
    EXPECT_TRUE(within(10s, [&] { return task.by_engine.load() > engine_after_wait + 10; }))
        << "the engine's thread did not take the turns back once the waiter left";
    task.end.store(true);
    EXPECT_TRUE(within(10s, [&] { return task.gone.load(std::memory_order_acquire); }));
  }
  EXPECT_EQ(detail::wait_helper().load(), nullptr) << "a destroyed engine still offered help";
}

TEST(LinkEngine, AWaiterTakesNoPassWhileTheEnginesThreadIsTakingOne) {
  counting_task task(std::this_thread::get_id());
  mpi::detail::link_engine engine;
  task.hold.store(true);
  engine.add(task);
  ASSERT_TRUE(within(10s, [&] { return task.held.load(std::memory_order_acquire); }));
  EXPECT_FALSE(engine.help()) << "a helper took a pass while the engine's thread was in one";
  EXPECT_EQ(task.by_waiter.load(), 0u);
  task.hold.store(false, std::memory_order_release);
  ASSERT_TRUE(within(10s, [&] { return !task.held.load(std::memory_order_acquire); }));
  // The engine's thread takes passes back to back; a helper gets one between two of them.
  EXPECT_TRUE(within(10s, [&] { return engine.help(); })) << "a helper never got a pass";
  EXPECT_GT(task.by_waiter.load(), 0u);
  task.end.store(true);
  EXPECT_TRUE(within(10s, [&] { return task.gone.load(std::memory_order_acquire); }));
}

} // namespace
