// The rank's link thread with tasks that only count their turns (no MPI call, no mpirun): a
// thread waiting on a ring takes the engine's turns, the engine's thread stands down while it
// does, and takes them back once the waiter leaves.

#include "../src/mpi/link_engine.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/ring.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

// Counts turns by the thread that made it (the waiter) and by any other (the engine's).
class counting_task final : public mpi::detail::engine_task {
public:
  explicit counting_task(std::thread::id waiter) : waiter_(waiter) {}
  bool turn() noexcept override {
    (std::this_thread::get_id() == waiter_ ? by_waiter : by_engine).fetch_add(1, std::memory_order_relaxed);
    return true; // always moving (a transfer under way): the engine's thread never paces itself
  }
  bool ended() const noexcept override { return end.load(std::memory_order_relaxed); }
  void retired() noexcept override { gone.store(true, std::memory_order_release); }
  std::chrono::nanoseconds idle_spin() const noexcept override { return 200us; }

  std::atomic<std::uint64_t> by_waiter{0}, by_engine{0};
  std::atomic<bool> end{false}, gone{false};

private:
  std::thread::id waiter_;
};

template <class Ready> bool within(std::chrono::nanoseconds limit, Ready&& ready) {
  for (const auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;)
    if (ready())
      return true;
    else
      std::this_thread::sleep_for(100us);
  return ready();
}

TEST(LinkEngine, AThreadWaitingOnARingTakesTheTurnsAndTheEngineStandsDown) {
  counting_task task(std::this_thread::get_id());
  {
    mpi::detail::link_engine engine;
    engine.add(task);
    ASSERT_TRUE(within(10s, [&] { return task.by_engine.load() > 0; })) << "the engine's thread never turned its task";
    ASSERT_NE(detail::wait_helper().load(), nullptr) << "the engine offers no help to waiters";

    // A thread popping from an empty ring, again and again (a ping-pong's waits): each wait takes
    // the engine's turns instead of yielding, for 200 us here.
    ring_buffer empty(16, 8);
    std::byte m[8];
    const auto engine_before = task.by_engine.load();
    for (int i = 0; i < 40; ++i)
      EXPECT_FALSE(ring_buffer::wait_until([&] { return empty.pop_n_bytes(m, 1) == 1; }, 200us));
    const auto engine_during = task.by_engine.load() - engine_before, waiter = task.by_waiter.load();
    EXPECT_GT(waiter, 1000u) << "the waiter did not take the engine's turns";
    // Standing down, the engine's thread only looks every 200 us whether helpers are still there;
    // it turns the task again only if the waiter stopped helping (descheduled for 100 us).
    EXPECT_LT(engine_during * 10, waiter) << "the engine's thread kept turning beside the waiter: " << engine_during
                                          << " turns against the waiter's " << waiter;

    const auto engine_after_wait = task.by_engine.load();
    EXPECT_TRUE(within(10s, [&] { return task.by_engine.load() > engine_after_wait + 10; }))
        << "the engine's thread did not take the turns back once the waiter left";
    task.end.store(true);
    EXPECT_TRUE(within(10s, [&] { return task.gone.load(std::memory_order_acquire); }));
  }
  EXPECT_EQ(detail::wait_helper().load(), nullptr) << "a destroyed engine still offered help";
}

} // namespace
