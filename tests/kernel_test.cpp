#include <ringpipe/kernel.hpp>
#include <ringpipe/occupancy.hpp>
#include <test_message.hpp>

#include "device_fixture.hpp"
#include "ring_stream.hpp"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <latch>
#include <thread>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::is_pocl;
using ringpipe::testing::is_rusticl;

namespace {

using ringpipe::testing::msg16;
using ringpipe::testing::stream;
using map16 = ring_kernel<msg16, msg16>;

kernel_spec test_kernel(const char* name, std::size_t bytes = 16) { return {test_stages_source(bytes), name, ""}; }

struct mode_case {
  kernel_mode mode;
  std::uint32_t capacity;
  std::uint32_t count;
};
std::string case_name(const ::testing::TestParamInfo<mode_case>& p) {
  return std::string(to_string(p.param.mode)) + "_capacity" + std::to_string(p.param.capacity);
}

class KernelModes : public ringpipe::testing::device_test, public ::testing::WithParamInterface<mode_case> {};

// One million messages host -> kernel -> host in each mode the device supports.
TEST_P(KernelModes, MillionMessagesExactlyOnceInOrder) {
  const auto [mode, capacity, count] = GetParam();
  const auto& dev = topo()[0];
  if (!dev.info().supports(mode)) GTEST_SKIP() << dev.name() << " does not support " << to_string(mode);
  ring<msg16> in(dev, capacity, {"in"}), out(dev, capacity, {"out"});
  kernel_options options;
  options.mode = mode;
  map16 k(rt(), dev, test_kernel("test_map"), options);
  k.start(in, out);
  EXPECT_EQ(k.mode(), mode);
  stream(in, out, count, k);
  EXPECT_EQ(k.state(), kernel_state::stopped);
  EXPECT_EQ(k.stats().msgs_in, count);
  EXPECT_EQ(k.stats().msgs_out, count);
  if (mode == kernel_mode::persistent) {
    EXPECT_EQ(k.stats().launches, 1u);
  }
}

// PoCL: persistent and parked over SVM, and batched launches over the same rings.
INSTANTIATE_TEST_SUITE_P(Pocl, KernelModes,
                         ::testing::Values(mode_case{kernel_mode::persistent, 1, 1'000'000},
                                           mode_case{kernel_mode::persistent, 2, 1'000'000},
                                           mode_case{kernel_mode::persistent, 1024, 1'000'000},
                                           mode_case{kernel_mode::parked, 1, 1'000'000},
                                           mode_case{kernel_mode::parked, 2, 1'000'000},
                                           mode_case{kernel_mode::parked, 1024, 1'000'000},
                                           mode_case{kernel_mode::batched, 1024, 1'000'000}),
                         case_name);
// rusticl: batched through device buffers. One launch per batch costs tens of microseconds, so
// the capacity-1 and -2 runs send fewer messages (a launch per message or two).
INSTANTIATE_TEST_SUITE_P(Rusticl, KernelModes,
                         ::testing::Values(mode_case{kernel_mode::batched, 1, 3'000},
                                           mode_case{kernel_mode::batched, 2, 6'000},
                                           mode_case{kernel_mode::batched, 1024, 1'000'000}),
                         case_name);

using KernelTest = ringpipe::testing::device_test;

// Rings in host memory: every device runs the kernel batched through device mirrors.
struct mirrored_stream {
  static constexpr std::uint32_t batch = 256;
  static constexpr std::uint32_t prefilled = 4 * batch;
  ring<msg16> in{prefilled * 4, {"in"}}, out{prefilled * 4, {"out"}};

  // Queues `prefilled` messages before the kernel starts, so that its first tick finds several
  // batches waiting, then streams the rest.
  void run(map16& k, std::uint32_t count, bool (*keep)(std::uint32_t)) {
    for (std::uint32_t i = 0; i < prefilled; ++i)
      ASSERT_TRUE(in.try_push(make_test_message<16>(i)));
    k.start(in, out);
    stream(in, out, count, 1, keep, {&k}, prefilled);
  }
  static kernel_options lanes(std::uint32_t n) {
    kernel_options options;
    options.batch_capacity = batch;
    options.staging_lanes = n;
    return options;
  }
};
bool every(std::uint32_t) { return true; }
bool even(std::uint32_t s) { return s % 2 == 0; }

// Double-buffered staging: a map kernel's next batch is uploaded while the current one runs;
// results still come out exactly once and in order.
TEST_F(KernelTest, AnyDeviceMirroredMapKernelOverlapsBatchesInOrder) {
  for (const auto keep : {every, even}) {
    mirrored_stream s;
    map16 k(rt(), topo()[0], test_kernel(keep == every ? "test_map" : "test_filter_even"), mirrored_stream::lanes(2));
    s.run(k, 50'000, keep);
    const auto stats = k.stats();
    EXPECT_EQ(stats.msgs_in, 50'000u);
    EXPECT_EQ(stats.msgs_out, keep == every ? 50'000u : 25'000u);
    // The first tick found four batches queued: it launched two, the second behind the first.
    EXPECT_GE(stats.overlapped_launches, 1u);
    EXPECT_LT(stats.overlapped_launches, stats.launches);
  }
}

// One lane, and raw kernels (which may stop short of their batch), run one batch at a time.
TEST_F(KernelTest, AnyDeviceMirroredBatchesOneAtATimeWhenAsked) {
  mirrored_stream s;
  map16 k(rt(), topo()[0], test_kernel("test_map"), mirrored_stream::lanes(1));
  s.run(k, 20'000, every);
  EXPECT_EQ(k.stats().overlapped_launches, 0u);
  EXPECT_EQ(k.stats().msgs_out, 20'000u);

  mirrored_stream raw;
  ring_kernel<msg16, msg16> stops(rt(), topo()[0], test_kernel("test_fail_at"), mirrored_stream::lanes(2));
  stops.set_arg(0, std::uint32_t{0xffffffffu}); // never fails: passes every message
  raw.run(stops, 20'000, every);
  EXPECT_EQ(stops.stats().overlapped_launches, 0u) << "a raw kernel got a second batch in flight";
}

TEST_F(KernelTest, AnyDeviceCountersStartingBelowTheWrap) {
  const auto& dev = topo()[0];
  const std::uint32_t start = 0xffffffffu - 5000;
  ring<msg16> in(dev, 256, {"in", start}), out(dev, 256, {"out", start});
  map16 k(rt(), dev, test_kernel("test_map"));
  k.start(in, out);
  stream(in, out, 100'000, k);
  EXPECT_LT(in.buffer().header()->head, start) << "counters wrapped";
}

TEST_F(KernelTest, AnyDeviceFilterDropsMessagesAndKeepsOrder) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 64, {"in"}), out(dev, 64, {"out"});
  map16 k(rt(), dev, test_kernel("test_filter_even"));
  k.start(in, out);
  stream(in, out, 100'001, 1, [](std::uint32_t s) { return s % 2 == 0; }, {&k});
  EXPECT_EQ(k.stats().msgs_in, 100'001u);
  EXPECT_EQ(k.stats().msgs_out, 50'001u);
}

// A round runs as a group of 8 work-items by default where the device keeps kernels resident on
// host threads (PoCL: a round's loops run over the whole group), 64 elsewhere; a group of any
// size drops exactly what the kernel drops and keeps the order of the rest.
TEST_F(KernelTest, AnyDeviceFilterKeepsOrderAtEveryGroupSize) {
  const auto& dev = topo()[0];
  const auto by_default = map16(rt(), dev, test_kernel("test_filter_even")).local_size();
  if (is_pocl(dev))
    EXPECT_EQ(by_default, 8u);
  else
    EXPECT_GT(by_default, 8u) << "64, or the kernel's limit below it (32 on llvmpipe)";
  // The default group streams in the other tests; llvmpipe compiles each group size for seconds.
  const auto groups = is_pocl(dev) ? std::vector<std::uint32_t>{3, 64} : std::vector<std::uint32_t>{8};
  for (const std::uint32_t group : groups) {
    SCOPED_TRACE("group of " + std::to_string(group));
    ring<msg16> in(dev, 64, {"in"}), out(dev, 64, {"out"});
    kernel_options options;
    options.local_size = group;
    map16 k(rt(), dev, test_kernel("test_filter_even"), options);
    EXPECT_EQ(k.local_size(), group);
    k.start(in, out);
    stream(in, out, 20'001, 1, even, {&k});
    EXPECT_EQ(k.stats().msgs_out, 10'001u);
  }
}

// A round that drops messages moves the kept results down to their slots: results larger than
// RP_MOVE_IN_PRIVATE_BYTES (stage.clh) word by word, every word of every message checked.
TEST_F(KernelTest, AnyDeviceFilterMovesLargeResultsDownWordByWord) {
  const auto& dev = topo()[0];
  using msg512 = test_message<512>;
  ring<msg512> in(dev, 64, {"in"}), out(dev, 64, {"out"});
  ring_kernel<msg512, msg512> k(rt(), dev, test_kernel("test_filter_even", 512));
  k.start(in, out);
  stream(in, out, 2'001, 1, [](std::uint32_t s) { return s % 2 == 0; }, {&k});
  EXPECT_EQ(k.stats().msgs_out, 1'001u);
}

// The same with messages of a size no word divides (301 bytes): moved down byte by byte.
TEST_F(KernelTest, AnyDeviceFilterMovesOddSizedResultsDownByteByByte) {
  struct odd_message {
    std::array<std::uint8_t, 301> bytes;
  };
  const auto make = [](std::uint32_t seq) {
    odd_message m{};
    std::memcpy(m.bytes.data(), &seq, sizeof seq);
    for (std::size_t b = sizeof seq; b < m.bytes.size(); ++b)
      m.bytes[b] = static_cast<std::uint8_t>(seq + b);
    return m;
  };
  const auto& dev = topo()[0];
  ring<odd_message> in(dev, 64, {"in"}), out(dev, 64, {"out"});
  ring_kernel<odd_message, odd_message> k(rt(), dev, {test_stages_source(16), "test_odd_filter_even", ""});
  k.start(in, out);
  constexpr std::uint32_t count = 2'001;
  std::uint32_t sent = 0, expected = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (expected < count && std::chrono::steady_clock::now() < deadline) {
    bool progress = false;
    while (sent < count && in.try_push(make(sent))) {
      progress = true;
      if (++sent == count) in.close();
    }
    if (progress) k.notify();
    odd_message got{};
    while (out.try_pop(got)) {
      const auto want = make(expected);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "message " << expected << " lost or changed";
      expected += 2;
      progress = true;
    }
    if (!progress) std::this_thread::yield();
  }
  EXPECT_EQ(expected, count + 1) << "the stream stalled";
  k.wait(10s);
  EXPECT_EQ(k.stats().msgs_out, 1'001u);
}

TEST_F(KernelTest, AnyDeviceSizeMismatchIsRefusedBeforeAnythingRuns) {
  const auto& dev = topo()[0];
  try {
    map16 k(rt(), dev, test_kernel("test_map", 32));
    FAIL() << "a 16-byte host type was accepted for a 32-byte kernel";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
    const std::string what = e.what();
    EXPECT_NE(what.find("kernel 'test_map' was declared for 32-byte messages in"), std::string::npos) << what;
    EXPECT_NE(what.find("host type gives 16-byte messages"), std::string::npos) << what;
  }
  map16 k(rt(), dev, test_kernel("test_map"));
  ring<test_message<32>> wide(dev, 4, {"wide"});
  ring<msg16> out(dev, 4, {"out"});
  try {
    k.start_buffers(wide.shared_buffer(), out.shared_buffer());
    FAIL() << "a ring of 32-byte slots was connected to a 16-byte kernel";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::message_size));
    EXPECT_NE(std::string(e.what()).find("input ring 'wide' has 32-byte slots"), std::string::npos) << e.what();
  }
}

TEST_F(KernelTest, AnyDeviceBuildErrorNamesTheKernel) {
  const auto& dev = topo()[0];
  kernel_spec spec{"#include <ringpipe/stage.clh>\nbool f(const int* a, int* b) { *b = *a return true; }\n"
                   "RINGPIPE_MAP_KERNEL(bad_stage, int, int, f)\n",
                   "bad_stage", ""};
  try {
    ring_kernel<int, int> k(rt(), dev, spec);
    FAIL();
  } catch (const build_error& e) {
    EXPECT_EQ(e.kernel_name(), "bad_stage");
    EXPECT_NE(std::string(e.what()).find("kernel 'bad_stage' failed to build"), std::string::npos);
    EXPECT_NE(e.build_log().find("expected ';'"), std::string::npos) << e.build_log();
  }
}

TEST_F(KernelTest, AnyDeviceKernelErrorCodeFailsWithItsName) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 16, {"in"}), out(dev, 16, {"out"});
  map16 k(rt(), dev, test_kernel("test_fail_at"));
  k.set_arg(0, std::uint32_t{10});
  k.start(in, out);
  for (std::uint32_t s = 0; s < 12; ++s)
    in.push(make_test_message<16>(s), 5s);
  k.notify();
  try {
    k.wait(20s);
    FAIL() << "a kernel that set an error code finished cleanly";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::kernel_fault));
    EXPECT_NE(std::string(e.what()).find("kernel 'test_fail_at'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("error code 42"), std::string::npos) << e.what();
  }
  EXPECT_EQ(k.state(), kernel_state::faulted);
  EXPECT_EQ(out.size(), 10u) << "messages before the fault were delivered";
}

TEST_F(KernelTest, AnyDeviceStopDrainsWhatIsQueued) {
  const auto& dev = topo()[0];
  ring<msg16> in(dev, 256, {"in"}), out(dev, 256, {"out"});
  map16 k(rt(), dev, test_kernel("test_map"));
  for (std::uint32_t s = 0; s < 200; ++s)
    ASSERT_TRUE(in.try_push(make_test_message<16>(s)));
  k.start(in, out);
  k.stop(20s);
  EXPECT_EQ(k.state(), kernel_state::stopped);
  EXPECT_EQ(out.size(), 200u) << "stop() drains the queued messages first";
  EXPECT_FALSE(out.closed()) << "a stop is not an end of stream";
}

TEST_F(KernelTest, PersistentOnRusticlIsRefusedWithTheReason) {
  const auto rusticl = ringpipe::testing::find_device(topo(), is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device");
  const auto& dev = topo()[*rusticl];
  ring<msg16> in(dev, 4), out(dev, 4);
  kernel_options options;
  options.mode = kernel_mode::persistent;
  map16 k(rt(), dev, test_kernel("test_map"), options);
  try {
    k.start(in, out);
    FAIL() << "persistent mode accepted on a device without fine-grained SVM";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::unsupported_mode));
    EXPECT_NE(std::string(e.what()).find("fine_buffer=no"), std::string::npos) << e.what();
  }
  map16 auto_mode(rt(), dev, test_kernel("test_map"));
  auto_mode.start(in, out);
  EXPECT_EQ(auto_mode.mode(), kernel_mode::batched);
  stream(in, out, 10'000, auto_mode);
}

// More kernels than the worker budget: the ones beyond it are parked and take turns; a chain of
// them still moves every message. A forced persistent kernel beyond the budget is refused.
TEST_F(KernelTest, PoclKernelsBeyondTheBudgetAreParkedOrRefused) {
  const auto pocl = ringpipe::testing::find_device(topo(), is_pocl);
  RINGPIPE_REQUIRE_DEVICE(pocl, "PoCL device");
  const auto& dev = topo()[*pocl];
  const auto budget = dev.info().persistent_budget;
  ASSERT_GE(budget, 1u);
  constexpr int stages = 4;
  std::vector<ring<msg16>> rings;
  for (int i = 0; i <= stages; ++i)
    rings.emplace_back(dev, 64, ring_options{"r" + std::to_string(i)});
  std::vector<std::unique_ptr<map16>> chain;
  for (int i = 0; i < stages; ++i) {
    chain.push_back(std::make_unique<map16>(rt(), dev, test_kernel("test_map")));
    chain.back()->start(rings[i], rings[i + 1]);
  }
  int persistent = 0;
  for (auto& k : chain)
    persistent += k->mode() == kernel_mode::persistent;
  EXPECT_EQ(persistent, static_cast<int>(budget) - 1) << "automatic mode keeps one worker for parked kernels";
  EXPECT_EQ(chain.back()->mode(), kernel_mode::parked);

  // Fill the rest of the budget with forced persistent kernels; one more is refused.
  kernel_options forced;
  forced.mode = kernel_mode::persistent;
  ring<msg16> spare_in(dev, 4), spare_out(dev, 4);
  map16 last(rt(), dev, test_kernel("test_map"), forced);
  last.start(spare_in, spare_out);
  ring<msg16> extra_in(dev, 4), extra_out(dev, 4);
  map16 extra(rt(), dev, test_kernel("test_map"), forced);
  try {
    extra.start(extra_in, extra_out);
    FAIL() << "a persistent kernel beyond the budget of " << budget << " was accepted";
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::budget_exceeded));
    EXPECT_NE(std::string(e.what()).find("budget is held by persistent kernels"), std::string::npos) << e.what();
  }
  last.stop(10s);

  std::vector<ring_kernel_base*> ks;
  ks.reserve(chain.size());
  for (auto& k : chain)
    ks.push_back(k.get());
  stream(rings.front(), rings.back(), 200'000, stages, [](std::uint32_t) { return true; },
         {ks[0], ks[1], ks[2], ks[3]});
  chain.clear();
  EXPECT_EQ(dev.budget().in_use(), 0u) << "stopped kernels give their workers back";
}

TEST_F(KernelTest, PoclDestroyingARunningKernelStopsIt) {
  const auto pocl = ringpipe::testing::find_device(topo(), is_pocl);
  RINGPIPE_REQUIRE_DEVICE(pocl, "PoCL device");
  const auto& dev = topo()[*pocl];
  ring<msg16> in(dev, 4), out(dev, 4);
  {
    kernel_options options;
    options.mode = kernel_mode::persistent;
    map16 k(rt(), dev, test_kernel("test_map"), options);
    k.start(in, out);
    ASSERT_TRUE(in.try_push(make_test_message<16>(0)));
    msg16 m{};
    ASSERT_TRUE(out.pop(m, 10s));
    EXPECT_EQ(dev.budget().persistent_in_use(), 1u);
  }
  EXPECT_EQ(dev.budget().in_use(), 0u);
}

} // namespace
