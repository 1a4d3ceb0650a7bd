// Message-passing litmus test on the ring layout, device to host: a kernel writes a message's
// payload and then publishes the ring's head (release); the host reads the head (acquire) and
// then the payload. The forbidden outcome is the new head with an old or partly written payload.
// Where the device shares fine-grained SVM with atomics, the kernel is resident and the host
// observes its stores as they happen; elsewhere (rusticl, GPUs without fine-grained SVM) the same
// test runs through the batched mirrors and checks the copies instead.

#include <ringpipe/kernel.hpp>
#include <test_message.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using msg64 = test_message<64>; // seq, check and 14 payload words, all derived from seq

// What the host read in a slot it had just seen published as message `seq`.
enum class outcome { complete, stale, torn, count };
outcome classify(const msg64& m, std::uint32_t seq, std::uint32_t capacity) {
  const auto expected = make_test_message<64>(seq);
  if (std::memcmp(&m, &expected, sizeof(m)) == 0) return outcome::complete;
  const auto previous = make_test_message<64>(seq - capacity); // the slot's last occupant
  if (std::memcmp(&m, &previous, sizeof(m)) == 0) return outcome::stale;
  return outcome::torn;
}

class Litmus : public ringpipe::testing::device_test, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(Litmus, AnyDeviceNewHeadNeverShowsAnOldPayload) {
  const std::uint32_t capacity = GetParam();
  const auto& dev = topo()[0];
  const bool resident = dev.info().supports(kernel_mode::persistent);
  // Batched, each launch carries at most `capacity` messages and costs a millisecond or so.
  const std::uint32_t count = resident ? 1'000'000 : 2'000 * capacity;
  std::cout << "[          ] " << dev.label() << ": "
            << (resident ? "resident kernel over fine-grained SVM"
                         : "no fine-grained SVM with atomics: batched through device mirrors")
            << "\n";
  ring<msg64> out(dev, capacity, {"litmus"});
  kernel_options options;
  options.mode = resident ? kernel_mode::persistent : kernel_mode::batched;
  ring_kernel<no_message, msg64> source(rt(), dev, {test_stages_source(64), "test_source", ""}, options);
  source.set_arg(0, count);
  source.start(out);

  // The observer: the ring's consumer protocol spelled out, with each step's order explicit.
  auto& r = out.buffer();
  std::array<std::uint64_t, static_cast<std::size_t>(outcome::count)> seen{};
  std::uint32_t seq = 0, first_bad = count;
  std::uint32_t tail = r.load_tail(std::memory_order_relaxed);
  auto last_progress = std::chrono::steady_clock::now();
  while (seq < count) {
    const std::uint32_t head = r.load_head(std::memory_order_acquire);
    if (head == tail) {
      if (std::chrono::steady_clock::now() - last_progress > 20s) {
        if (auto f = source.failure()) std::rethrow_exception(f);
        FAIL() << "no message for 20 s after " << seq;
      }
      continue;
    }
    for (; tail != head; ++tail, ++seq) {
      msg64 m;
      std::memcpy(&m, r.slot(tail), sizeof(m));
      const auto o = classify(m, seq, capacity);
      ++seen[static_cast<std::size_t>(o)];
      if (o != outcome::complete && first_bad == count) first_bad = seq;
    }
    r.publish_tail(tail);
    last_progress = std::chrono::steady_clock::now();
  }
  source.wait(10s);
  std::cout << "[          ] " << count << " messages, capacity " << capacity << ": complete "
            << seen[static_cast<std::size_t>(outcome::complete)] << ", stale "
            << seen[static_cast<std::size_t>(outcome::stale)] << ", torn "
            << seen[static_cast<std::size_t>(outcome::torn)] << "\n";
  EXPECT_EQ(seen[static_cast<std::size_t>(outcome::complete)], count)
      << "forbidden outcomes, the first at message " << first_bad;
  EXPECT_TRUE(out.buffer().drained());
}

// Capacity 1 and 2: every slot is rewritten as soon as the host frees it, so a stale read would
// show the previous message; 64: the kernel publishes many messages per head store.
INSTANTIATE_TEST_SUITE_P(Capacities, Litmus, ::testing::Values(1u, 2u, 64u));

} // namespace
