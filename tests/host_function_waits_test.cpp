// A host function that waits for work the runtime's own io threads do, on a runtime fixed at one
// io thread: a staged copy between arrays (its chunks step on the io threads) and an all-reduce
// over devices that share no memory (its copies too). The waiting thread takes a stand-in
// (detail::blocked_wait); without one each waited out its timeout and failed. Run with PoCL and
// rusticl (their arrays are copied through the host).

#include "device_fixture.hpp"

#include <ringpipe/array.hpp>
#include <ringpipe/collective.hpp>
#include <ringpipe/pipeline.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

struct tick {
  std::uint32_t seq;
};

class HostFunctionWaits : public ringpipe::testing::device_test {
protected:
  HostFunctionWaits() : one_(topology::discover(), one_thread()) {}
  static runtime_options one_thread() {
    runtime_options o;
    o.threads = 1;
    return o;
  }
  /// Two devices whose arrays are copied through the host (no shared context), if there are.
  std::optional<std::pair<const device*, const device*>> staged_pair() const {
    for (const auto& a : one_.devices())
      for (const auto& b : one_.devices())
        if (!a.shares_context_with(b)) return std::make_pair(&a, &b);
    return std::nullopt;
  }
  /// Calls `wait` from a sink's function, once; what it threw, if anything.
  std::string from_a_host_function(const std::function<void()>& wait) {
    std::string failure;
    pipeline p(one_, {"waits"});
    auto src = p.add_source<tick>("source", [sent = false]() mutable -> std::optional<tick> {
      if (sent) return std::nullopt;
      sent = true;
      return tick{0};
    });
    auto sink = p.add_sink<tick>("sink", [&](const tick&) {
      try {
        wait();
      } catch (const std::exception& e) {
        failure = e.what();
      }
    });
    p.connect(src.out(), sink.in());
    p.run(60s);
    return failure;
  }
  runtime one_;
};

} // namespace

TEST_F(HostFunctionWaits, AStagedCopy) {
  const auto pair = staged_pair();
  if (!pair) GTEST_SKIP() << "needs two devices that share no memory (PoCL and rusticl: RUSTICL_ENABLE=llvmpipe)";
  const auto [a, b] = *pair;
  constexpr std::size_t n = (std::size_t{1} << 20) + 3;
  device_array<std::uint32_t> x(one_, *a, n, "x"), y(one_, *b, n, "y");
  std::vector<std::uint32_t> data(n), got(n);
  for (std::size_t i = 0; i < n; ++i)
    data[i] = static_cast<std::uint32_t>(i * 2654435761u);
  x.write(std::span<const std::uint32_t>(data), 10s);
  EXPECT_EQ(from_a_host_function([&] { ringpipe::copy(x, y, 10s); }), "");
  y.read(std::span<std::uint32_t>(got), 10s);
  EXPECT_EQ(got, data) << a->label() << " -> " << b->label();
  EXPECT_EQ(one_.threads(), 1u) << "the stand-in still runs";
}

TEST_F(HostFunctionWaits, AnAllReduce) {
  const auto pair = staged_pair();
  if (!pair) GTEST_SKIP() << "needs two devices that share no memory (PoCL and rusticl: RUSTICL_ENABLE=llvmpipe)";
  const auto [a, b] = *pair;
  constexpr std::size_t n = 4099;
  std::vector<device_array<std::int32_t>> parts{device_array<std::int32_t>(one_, *a, n, "left"),
                                                device_array<std::int32_t>(one_, *b, n, "right")};
  std::vector<std::int32_t> left(n), right(n), got(n);
  for (std::size_t i = 0; i < n; ++i) {
    left[i] = static_cast<std::int32_t>(i);
    right[i] = static_cast<std::int32_t>(3 * i + 1);
  }
  parts[0].write(std::span<const std::int32_t>(left), 10s);
  parts[1].write(std::span<const std::int32_t>(right), 10s);
  collective_options o;
  o.name = "sums";
  o.timeout = 10s;
  o.map_cpu_buffers = false; // rusticl's part copied in chunks on the runtime's threads
  EXPECT_EQ(from_a_host_function([&] { all_reduce(parts, reduction<std::int32_t>::sum(), o); }), "");
  for (const auto& part : parts) {
    part.read(std::span<std::int32_t>(got), 10s);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], static_cast<std::int32_t>(4 * i + 1)) << part.describe() << " element " << i;
  }
  EXPECT_EQ(one_.threads(), 1u) << "the stand-in still runs";
}
