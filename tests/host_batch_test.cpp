// Host stages with batch functions (add_source_batch, add_host_batch, add_sink_batch) beside
// per-message ones: exactly once, in order, spans bounded by the staging batch, a throw loses
// exactly the batch it was given, a function that claims more than its span is refused. Host
// stages need no OpenCL device: ctest runs this with no platform.

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "support/described_topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <span>
#include <stdexcept>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

struct reading {
  std::uint32_t seq;
  float value;
};
struct scaled {
  std::uint64_t seq;
  double value;
};

constexpr std::uint32_t staging_batch = 64;

pipeline_options options(const char* name) {
  pipeline_options o;
  o.name = name;
  o.staging_batch = staging_batch;
  return o;
}

// Generates `total` readings in spans, `chunk` at most per call (the rest of the span unused).
auto batch_readings(std::uint32_t total, std::uint32_t chunk, std::atomic<std::uint32_t>& generated) {
  return [total, chunk, &generated](std::span<reading> room) -> std::optional<std::size_t> {
    EXPECT_FALSE(room.empty()) << "a batch source was called without room";
    const auto next = generated.load();
    if (next == total) return std::nullopt;
    const auto n = std::min<std::size_t>({room.size(), chunk, std::size_t{total - next}});
    for (std::size_t i = 0; i < n; ++i)
      room[i] = {static_cast<std::uint32_t>(next + i), static_cast<float>(next + i) * 0.5f};
    generated.store(static_cast<std::uint32_t>(next + n));
    return n;
  };
}

// Keeps readings whose seq is not a multiple of 3, widened and scaled.
std::size_t keep_and_scale(std::span<const reading> in, std::span<scaled> out) {
  std::size_t k = 0;
  for (const auto& r : in)
    if (r.seq % 3 != 0) out[k++] = {r.seq, r.value * 4.0};
  return k;
}

class HostBatchTest : public ::testing::Test {
protected:
  runtime rt{ringpipe::testing::describe({ringpipe::testing::pocl_cpu()}), runtime_options{2}};
};

} // namespace

// Batch and per-message stages in one pipeline: every kept message exactly once, in order, with
// its value; batch functions see spans of more than one message, never beyond the staging batch.
TEST_F(HostBatchTest, BatchAndPerMessageStagesDeliverExactlyOnceInOrder) {
  constexpr std::uint32_t total = 200'000;
  for (const bool batch_sink : {true, false}) {
    SCOPED_TRACE(batch_sink ? "batch sink" : "per-message sink");
    std::atomic<std::uint32_t> generated{0};
    std::size_t largest_in = 0, largest_out = 0, delivered = 0, bad = 0;
    std::uint64_t expected = 1; // seq 0 is dropped
    const auto check = [&](const scaled& s) {
      if (s.seq != expected || s.value != static_cast<double>(static_cast<float>(s.seq) * 0.5f) * 4.0) ++bad;
      expected = s.seq + 1 + ((s.seq + 1) % 3 == 0 ? 1 : 0);
      ++delivered;
    };
    pipeline p(rt, options("batches"));
    auto src = p.add_source_batch<reading>("source", batch_readings(total, 1000, generated));
    auto mid = p.add_host_batch<reading, scaled>("scale", [&](std::span<const reading> in, std::span<scaled> out) {
      largest_in = std::max(largest_in, in.size());
      EXPECT_EQ(out.size(), in.size());
      return keep_and_scale(in, out);
    });
    auto ident = p.add_host<scaled, scaled>("identity", [](const scaled& s) { return s; });
    p.connect(src.out(), mid.in());
    p.connect(mid.out(), ident.in());
    if (batch_sink) {
      auto sink = p.add_sink_batch<scaled>("sink", [&](std::span<const scaled> in) {
        largest_out = std::max(largest_out, in.size());
        for (const auto& s : in)
          check(s);
      });
      p.connect(ident.out(), sink.in());
    } else {
      auto sink = p.add_sink<scaled>("sink", check);
      p.connect(ident.out(), sink.in());
    }
    p.run(2min);
    EXPECT_EQ(generated.load(), total);
    EXPECT_EQ(delivered, total - (total + 2) / 3) << "every message not a multiple of 3, once";
    EXPECT_EQ(bad, 0u) << "out of order or wrong value";
    EXPECT_GT(largest_in, 1u) << "the batch host function was called per message";
    EXPECT_LE(largest_in, staging_batch);
    if (batch_sink) {
      EXPECT_GT(largest_out, 1u);
      EXPECT_LE(largest_out, staging_batch);
    }
  }
}

// Over a round-robin split (per message), batch functions get spans of one, still exactly once.
TEST_F(HostBatchTest, RoundRobinFanOutCallsBatchFunctionsPerMessage) {
  constexpr std::uint32_t total = 10'000;
  std::atomic<std::uint32_t> generated{0};
  std::atomic<std::uint64_t> sum{0}, count{0};
  pipeline p(rt, options("round-robin"));
  auto src = p.add_source_batch<reading>("source", batch_readings(total, staging_batch, generated));
  auto mid = p.add_host_batch<reading, scaled>("scale", [](std::span<const reading> in, std::span<scaled> out) {
    for (std::size_t i = 0; i < in.size(); ++i)
      out[i] = {in[i].seq, 1.0};
    return in.size();
  });
  p.set_fan_out(mid, fan_out::round_robin);
  const auto add = [&](std::span<const scaled> in) {
    for (const auto& s : in)
      sum.fetch_add(s.seq);
    count.fetch_add(in.size());
  };
  auto left = p.add_sink_batch<scaled>("left", add);
  auto right = p.add_sink_batch<scaled>("right", add);
  p.connect(src.out(), mid.in());
  p.connect(mid.out(), left.in());
  p.connect(mid.out(), right.in());
  p.run(2min);
  EXPECT_EQ(count.load(), total);
  EXPECT_EQ(sum.load(), std::uint64_t{total} * (total - 1) / 2);
}

// A batch function that throws loses the batch it was given, no more and no less: delivered +
// undelivered + lost = generated, and the loss is reported at its stage.
TEST_F(HostBatchTest, ABatchThatThrowsLosesExactlyItsBatch) {
  for (const bool in_sink : {false, true}) {
    SCOPED_TRACE(in_sink ? "batch sink throws" : "batch host function throws");
    std::atomic<std::uint32_t> generated{0};
    std::atomic<std::uint64_t> delivered{0}, thrown_batch{0};
    const auto boom = [&](std::span<const reading> in) {
      if (std::any_of(in.begin(), in.end(), [](const reading& r) { return r.seq == 3000; })) {
        thrown_batch = in.size();
        throw std::runtime_error("boom at 3000");
      }
    };
    pipeline p(rt, options("batch-throw"));
    auto src = p.add_source_batch<reading>("source", batch_readings(1'000'000, 7, generated));
    auto mid = p.add_host_batch<reading, reading>("mid", [&](std::span<const reading> in, std::span<reading> out) {
      if (!in_sink) boom(in);
      std::copy(in.begin(), in.end(), out.begin());
      return in.size();
    });
    auto sink = p.add_sink_batch<reading>("sink", [&](std::span<const reading> in) {
      if (in_sink) boom(in);
      delivered.fetch_add(in.size());
    });
    p.connect(src.out(), mid.in());
    p.connect(mid.out(), sink.in());
    p.start();
    ringpipe::testing::expect_error([&] { p.wait(60s); }, make_error_code(errc::stage_failed), {"boom at 3000"},
                                    "the throwing stage finished");
    const auto report = p.stop();
    EXPECT_EQ(delivered.load() + report.undelivered + report.lost, generated.load())
        << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
    ASSERT_EQ(report.lost_in.size(), 1u) << report.text();
    EXPECT_EQ(report.lost_in[0].stage, in_sink ? "sink" : "mid");
    EXPECT_EQ(report.lost, thrown_batch.load()) << "the whole batch it held, and only it";
    EXPECT_GE(thrown_batch.load(), 1u);
  }
}

// A batch function that says it wrote more results than its span holds is refused by name.
TEST_F(HostBatchTest, ABatchCountBeyondItsSpanFailsTheStage) {
  std::atomic<std::uint32_t> generated{0};
  pipeline p(rt, options("overclaim"));
  auto src = p.add_source_batch<reading>("source", batch_readings(1000, 10, generated));
  auto mid = p.add_host_batch<reading, reading>(
      "liar", [](std::span<const reading> in, std::span<reading>) { return in.size() + 1; });
  auto sink = p.add_sink<reading>("sink", [](const reading&) {});
  p.connect(src.out(), mid.in());
  p.connect(mid.out(), sink.in());
  p.start();
  ringpipe::testing::expect_error(
      [&] { p.wait(60s); }, make_error_code(errc::invalid_argument),
      {"stage 'liar' failed", "a batch host function returned ", " messages for a span of "},
      "the stage's count was believed");
  (void)p.stop();
}
