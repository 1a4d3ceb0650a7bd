// Kernels as users write them: map kernels with constants of their own and the stateful-kernel
// scaffold (sources that include the user's own files: authoring_includes_test.cpp). Run on every device of the
// environment (PoCL: resident over SVM; rusticl: batched through device mirrors).

#include <ringpipe/pipeline.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/runtime.hpp>

#include "authoring_items.hpp"
#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::item;
using ringpipe::testing::items;

namespace {

// The host mirror of the kernels' constants (their item: authoring_items.hpp).
struct affine {
  cl_uint mul;
  cl_uint add;
};

constexpr const char* affine_source = R"(#include <ringpipe/stage.clh>
typedef struct { uint seq; uint value; } item;
typedef struct { uint mul; uint add; } affine;
inline bool apply(const item* in, item* out, affine a) {
  out->seq = in->seq;
  out->value = in->value * a.mul + a.add;
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(affine_map, item, item, affine, apply)
)";

// Running totals: each message leaves with the sum of the values so far; at the end, one message
// (seq 0xffffffff) carries the count.
constexpr const char* running_sum_source = R"(#include <ringpipe/stage.clh>
typedef struct { uint seq; uint value; } item;
typedef struct { ulong sum; uint count; uint pad; } totals;
inline bool add_up(__global totals* t, const item* in, item* out) {
  t->sum += in->value;
  t->count += 1;
  out->seq = in->seq;
  out->value = (uint)t->sum;
  return true;
}
inline bool report(__global totals* t, item* out) {
  out->seq = 0xffffffffu;
  out->value = t->count;
  return true;
}
RINGPIPE_STATEFUL_KERNEL(running_sum, item, item, totals, add_up, report)
)";

class AuthoringTest : public ringpipe::testing::device_test {
protected:
  kernel_spec affine_kernel(cl_uint mul, cl_uint add) const {
    kernel_spec spec(affine_source, "affine_map");
    spec.args = {kernel_arg::of(affine{mul, add})};
    return spec;
  }
};

// Two stages of one program differ only in their constants; each applies its own, in order.
TEST_F(AuthoringTest, MapKernelArgumentsGiveEachStageItsOwnConstants) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    constexpr std::uint32_t count = 20000;
    pipeline p(rt(), {"affine"});
    auto src = p.add_source<item>("source", items(count));
    auto first = p.add_kernel<item, item>("times3plus1", affine_kernel(3, 1), on_device(dev.index()));
    auto second = p.add_kernel<item, item>("times5plus7", affine_kernel(5, 7), on_device(dev.index()));
    std::uint32_t expected = 0, wrong = 0;
    auto sink = p.add_sink<item>("sink", [&](const item& m) {
      if (m.seq != expected++ || m.value != (m.seq * 3 + 1) * 5 + 7) ++wrong;
    });
    p.connect(src.out(), first.in());
    p.connect(first.out(), second.in());
    p.connect(second.out(), sink.in());
    p.run(2min);
    EXPECT_EQ(expected, count);
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(p.metrics().fused_links, 0u) << "kernels with arguments are not fused: " << p.plan();
  }
}

// State survives relaunches (a ring of 8 slots and an idle budget of 16 relaunch the kernel often), and
// the end-of-stream function runs once, after every message.
TEST_F(AuthoringTest, StatefulKernelKeepsItsStateAndReportsAtTheEnd) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    constexpr std::uint32_t count = 5000;
    pipeline p(rt(), {"running-sum"});
    auto src = p.add_source<item>("source", items(count));
    // Parked with a short idle budget where the device can (batched kernels relaunch anyway).
    kernel_options relaunching;
    if (dev.info().supports(kernel_mode::parked)) relaunching.mode = kernel_mode::parked;
    relaunching.idle_budget = 16;
    auto sum =
        p.add_kernel<item, item>("sum", {running_sum_source, "running_sum"}, on_device(dev.index()), relaunching);
    std::uint32_t expected = 0, wrong = 0, reports = 0, reported_count = 0;
    std::uint64_t total = 0;
    auto sink = p.add_sink<item>("sink", [&](const item& m) {
      if (m.seq == 0xffffffffu) {
        ++reports;
        reported_count = m.value;
        return;
      }
      total += m.seq;
      if (reports != 0 || m.seq != expected++ || m.value != static_cast<cl_uint>(total)) ++wrong;
    });
    link_options small;
    small.capacity = 8;
    p.connect(src.out(), sum.in(), small);
    p.connect(sum.out(), sink.in(), small);
    p.run(2min);
    EXPECT_EQ(expected, count);
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(reports, 1u);
    EXPECT_EQ(reported_count, count);
    const auto metrics = p.metrics();
    const auto* stage = metrics.stage("sum");
    ASSERT_NE(stage, nullptr);
    EXPECT_GT(stage->launches, 1u) << "one launch: relaunches were not tested\n" << metrics.table();
  }
}

TEST_F(AuthoringTest, StateSizeOtherThanTheDeclaredOneIsRefused) {
  kernel_spec spec(running_sum_source, "running_sum");
  spec.state_bytes = 4;
  pipeline p(rt(), {"state-size"});
  auto src = p.add_source<item>("source", items(1));
  auto sum = p.add_kernel<item, item>("sum", spec);
  auto sink = p.add_sink<item>("sink", [](const item&) {});
  p.connect(src.out(), sum.in());
  p.connect(sum.out(), sink.in());
  expect_error([&] { p.start(); }, make_error_code(errc::invalid_argument),
               {"stage 'sum'", "declares 16 bytes of state", "state_bytes says 4"}, "a wrong state size started");
}

// Groups of two: PoCL's compiler aborts the process on a map kernel's round of fewer than three
// work-items, so it is refused there before anything runs, naming kernel and device; elsewhere it
// runs, every message in order.
TEST_F(AuthoringTest, MapKernelOfTwoWorkItemsRunsOrIsRefusedWhereTheCompilerCannot) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    constexpr std::uint32_t count = 5000;
    pipeline p(rt(), {"pair"});
    auto src = p.add_source<item>("source", items(count));
    kernel_options two;
    two.local_size = 2;
    auto k = p.add_kernel<item, item>("pair", affine_kernel(3, 1), on_device(dev.index()), two);
    std::uint32_t expected = 0, wrong = 0;
    auto sink = p.add_sink<item>("sink", [&](const item& m) {
      if (m.seq != expected++ || m.value != m.seq * 3 + 1) ++wrong;
    });
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
    if (dev.info().platform.find("Portable Computing Language") != std::string::npos) {
      expect_error([&] { p.start(); }, make_error_code(errc::invalid_argument),
                   {"stage 'pair'", "local size 2", dev.name(), "fewer than 3 work-items"},
                   "a group PoCL cannot compile started");
      continue;
    }
    p.run(2min);
    EXPECT_EQ(expected, count);
    EXPECT_EQ(wrong, 0u);
  }
}

TEST_F(AuthoringTest, MissingKernelArgumentsAreRefusedWithTheCounts) {
  pipeline p(rt(), {"arg-count"});
  auto src = p.add_source<item>("source", items(1));
  auto k = p.add_kernel<item, item>("affine", {affine_source, "affine_map"});
  auto sink = p.add_sink<item>("sink", [](const item&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  expect_error([&] { p.start(); }, make_error_code(errc::invalid_argument),
               {"stage 'affine'", "kernel 'affine_map' takes 1 argument(s) of its own", "not set: 0"},
               "a kernel without its arguments started");
  pipeline extra(rt(), {"arg-count"});
  auto spec = affine_kernel(1, 2);
  spec.args.push_back(kernel_arg::of(cl_uint{3}));
  auto src2 = extra.add_source<item>("source", items(1));
  auto k2 = extra.add_kernel<item, item>("affine", spec);
  auto sink2 = extra.add_sink<item>("sink", [](const item&) {});
  extra.connect(src2.out(), k2.in());
  extra.connect(k2.out(), sink2.in());
  expect_error([&] { extra.start(); }, make_error_code(errc::invalid_argument),
               {"stage 'affine'", "takes 1 argument(s) of its own", "kernel_spec::args gives 2"},
               "a kernel with an argument too many started");
}

// Per-message loops long enough that a batch runs past llvmpipe's 65535 loop iterations per
// launch (16 rounds of 6000): rounds cut short are discarded and redone, never published half done.
// (On llvmpipe a map kernel's batches run as spans, a message per work-item, below the limit
// here: there the redo is left to map kernels at a barrier, which keep the ring-kernel batch.)
constexpr const char* spin_source = R"(#include <ringpipe/stage.clh>
typedef struct { uint seq; uint value; } item;
typedef struct { uint rounds; } spin_args;
inline uint spin_value(uint seq, uint rounds) {
  uint x = seq;
  for (uint r = 0; r < rounds; ++r)
    x = x * 1664525u + 1013904223u;
  return x;
}
inline bool spin(const item* in, item* out, spin_args a) {
  out->seq = in->seq;
  out->value = spin_value(in->value, a.rounds);
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(spin_map, item, item, spin_args, spin)
typedef struct { uint count; } seen;
inline bool spin_and_count(__global seen* s, const item* in, item* out) {
  s->count += 1;
  out->seq = in->seq;
  out->value = spin_value(in->value, 6000u);
  return true;
}
inline bool no_summary(__global seen* s, item* out) { return false; }
RINGPIPE_STATEFUL_KERNEL(spin_stateful, item, item, seen, spin_and_count, no_summary)
)";

cl_uint spin_value(cl_uint seq, cl_uint rounds) {
  for (cl_uint r = 0; r < rounds; ++r)
    seq = seq * 1664525u + 1013904223u;
  return seq;
}

TEST_F(AuthoringTest, MapRoundsCutShortByTheDriverAreRedoneNotPublished) {
  for (const auto& dev : topo().devices()) {
    SCOPED_TRACE(dev.name());
    constexpr std::uint32_t count = 3000;
    constexpr cl_uint rounds = 6000;
    kernel_spec spec(spin_source, "spin_map");
    spec.args = {kernel_arg::of(rounds)};
    pipeline p(rt(), {"spin"});
    auto src = p.add_source<item>("source", items(count));
    auto k = p.add_kernel<item, item>("spin", spec, on_device(dev.index()));
    std::uint32_t expected = 0, wrong = 0;
    auto sink = p.add_sink<item>("sink", [&](const item& m) {
      if (m.seq != expected++ || m.value != spin_value(m.seq, rounds)) ++wrong;
    });
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
    p.run(5min);
    EXPECT_EQ(expected, count);
    EXPECT_EQ(wrong, 0u);
  }
}

// A stateful kernel cannot redo a round (its state holds part of it): it fails, saying why, and
// the messages of that round are still in its input ring, not lost.
TEST_F(AuthoringTest, StatefulRoundCutShortByTheDriverFailsSayingWhy) {
  const auto found = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(found, "rusticl device (llvmpipe's loop limit)");
  constexpr std::uint32_t count = 3000;
  pipeline p(rt(), {"spin-stateful"});
  std::atomic<std::uint32_t> generated{0};
  auto src = p.add_source<item>("source", [&, next = items(count)]() mutable {
    auto m = next();
    if (m) ++generated;
    return m;
  });
  auto k = p.add_kernel<item, item>("counter", {spin_source, "spin_stateful"}, on_device(*found));
  std::uint32_t delivered = 0;
  auto sink = p.add_sink<item>("sink", [&](const item&) { ++delivered; });
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.start();
  expect_error([&] { p.wait(5min); }, make_error_code(errc::kernel_fault),
               {"stage 'counter' failed", "cut short by its driver", "65535 iterations"},
               "the stateful kernel finished");
  const auto report = p.stop();
  EXPECT_EQ(delivered + report.undelivered + report.lost, generated.load()) << report.text();
  EXPECT_GT(generated.load(), 0u);
}

// One message whose own loop runs past llvmpipe's limit can never be published: relaunching the
// round would be cut short again for ever. The kernel fails saying why; nothing is lost.
TEST_F(AuthoringTest, MapMessageLongerThanTheDriversLoopLimitFailsInsteadOfRelaunching) {
  const auto found = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(found, "rusticl device (llvmpipe's loop limit)");
  constexpr std::uint32_t count = 100;
  kernel_spec spec(spin_source, "spin_map");
  spec.args = {kernel_arg::of(cl_uint{70000})};
  pipeline p(rt(), {"spin-too-long"});
  auto src = p.add_source<item>("source", items(count));
  auto k = p.add_kernel<item, item>("long-spin", spec, on_device(*found));
  std::uint32_t delivered = 0, wrong = 0;
  auto sink = p.add_sink<item>("sink", [&](const item& m) {
    ++delivered;
    if (m.value != spin_value(m.seq, 70000)) ++wrong; // a loop cut short and published anyway
  });
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.start();
  expect_error([&] { p.wait(1min); }, make_error_code(errc::kernel_fault),
               {"stage 'long-spin' failed", "cannot run its messages on this device", "65535 iterations"},
               "a kernel whose messages can never finish on llvmpipe");
  const auto report = p.stop();
  EXPECT_EQ(delivered, 0u) << wrong << " of them wrong";
  EXPECT_EQ(report.lost, 0u) << report.text();
  EXPECT_EQ(delivered + report.undelivered, count) << report.text();
}

} // namespace
