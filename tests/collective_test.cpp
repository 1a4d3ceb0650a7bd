// Collectives on 1, 2 and 3 devices (PoCL x2 + rusticl where present) at sizes 1, 1000 and
// 2^20 + 7, every operation and user operations, against a host reference: exact for integers,
// within 1e-5 relative for floats. Failures name the device; bad calls are refused.
#include "device_fixture.hpp"

#include <ringpipe/collective.hpp>
#include <ringpipe/occupancy.hpp>

#include <cmath>
#include <cstdint>
#include <functional>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

const std::size_t sizes[] = {1, 1000, (std::size_t{1} << 20) + 7};

template <class T> std::vector<T> values(std::size_t n, std::uint32_t seed) {
  std::vector<T> v(n);
  std::uint32_t x = seed * 2654435761u + 7u;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    if constexpr (std::is_floating_point_v<T>)
      e = static_cast<T>(0.999 + (x % 2001) * 1e-6); // products stay near 1
    else
      e = static_cast<T>(x % 1000 + 1);
  }
  return v;
}

template <class T> void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * std::fabs(want[i])) << what << " element " << i;
    } else {
      ASSERT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
}

template <class T> std::vector<reduction<T>> every_operation() {
  std::vector<reduction<T>> ops = {reduction<T>::sum(), reduction<T>::product(), reduction<T>::min(),
                                   reduction<T>::max()};
  if constexpr (std::is_floating_point_v<T>) {
    ops.push_back(reduction<T>::custom("largest magnitude", "fmax(fabs(a), fabs(b))",
                                       [](T a, T b) { return std::fmax(std::fabs(a), std::fabs(b)); }));
    // No host form: combined by kernels even where the host could reach the arrays.
    ops.push_back(reduction<T>::custom("sum on devices", "a + b"));
  } else {
    ops.push_back(reduction<T>::custom("xor", "a ^ b", [](T a, T b) { return a ^ b; }));
    ops.push_back(reduction<T>::custom("xor on devices", "a ^ b"));
  }
  return ops;
}

collective_options called(std::string name, std::size_t one_shot_bytes = collective_options{}.one_shot_bytes) {
  collective_options o;
  o.name = std::move(name);
  o.one_shot_bytes = one_shot_bytes;
  return o;
}

/// The host reference of an operation: its host form, or for the device-only ones what their
/// OpenCL C computes.
template <class T> T host_op(const reduction<T>& op, T a, T b) {
  if (op.on_host) return op.on_host(a, b);
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(a + b); // "sum on devices"
  else
    return a ^ b; // "xor on devices"
}

class Collectives : public ringpipe::testing::device_test {
protected:
  /// The first k devices' arrays of n elements, filled from seeds; and the host copies.
  template <class T>
  std::vector<device_array<T>> inputs(std::size_t k, std::size_t n, std::uint32_t seed,
                                      std::vector<std::vector<T>>& host) {
    std::vector<device_array<T>> a;
    host.clear();
    for (std::size_t d = 0; d < k; ++d) {
      a.emplace_back(rt(), topo()[d], n, "in" + std::to_string(d));
      host.push_back(values<T>(n, seed + static_cast<std::uint32_t>(d)));
      a.back().write(host.back());
    }
    return a;
  }
  template <class T> static std::vector<T> read(const device_array<T>& a) {
    std::vector<T> v(a.size());
    a.read(v);
    return v;
  }
  template <class T> static std::vector<T> reference(const std::vector<std::vector<T>>& host, const reduction<T>& op) {
    auto r = host[0];
    for (std::size_t p = 1; p < host.size(); ++p)
      for (std::size_t i = 0; i < r.size(); ++i)
        r[i] = host_op(op, r[i], host[p][i]);
    return r;
  }

  template <class T> void all_reduce_everywhere() {
    std::uint32_t seed = 1;
    for (std::size_t k = 1; k <= topo().size(); ++k)
      for (const auto n : sizes)
        for (const auto& op : every_operation<T>()) {
          std::vector<std::vector<T>> host;
          auto in = inputs<T>(k, n, seed += 10, host);
          const auto want = reference(host, op);
          const bool in_place = seed % 20 == 1;
          std::vector<device_array<T>> out;
          if (in_place)
            out = in;
          else
            for (std::size_t d = 0; d < k; ++d)
              out.emplace_back(rt(), topo()[d], n, "out" + std::to_string(d));
          auto o = called(op.name);
          o.map_cpu_buffers = seed % 30 != 1; // rusticl's buffers copied in chunks, as a GPU's are
          all_reduce(in, out, op, o);
          for (std::size_t d = 0; d < k; ++d)
            expect_close(read(out[d]), want,
                         "all_reduce " + op.name + " on " + std::to_string(k) + " devices, " + std::to_string(n) +
                             " elements" + (in_place ? " in place" : "") + ", device " + std::to_string(d));
        }
  }
};

} // namespace

TEST_F(Collectives, AllReduceOfIntegersIsExactOnEveryDeviceCountSizeAndOperation) {
  all_reduce_everywhere<std::uint32_t>();
}

TEST_F(Collectives, AllReduceOfFloatsIsWithinOneInAHundredThousand) { all_reduce_everywhere<float>(); }

TEST_F(Collectives, ALargeArrayInSharedMemoryIsSplitBetweenHostThreads) {
  // 16 MiB and 5 elements: from 8 MiB on, one host thread per idle worker of the devices' pool
  // combines a range of its own; the ranges must meet at element boundaries and cover every one.
  const std::size_t n = (std::size_t{16} << 20) / sizeof(std::uint32_t) + 5;
  ASSERT_GE(topo().size(), 2u) << "this test needs two PoCL devices";
  ASSERT_TRUE(topo()[0].shares_context_with(topo()[1])) << "this test needs two PoCL devices";
  ASSERT_GE(topo()[0].budget().budget(), 2U) << "with one worker the array is not split";
  std::uint32_t seed = 300;
  for (const auto& op : {reduction<std::uint32_t>::sum(), reduction<std::uint32_t>::min()})
    for (const bool in_place : {true, false}) {
      std::vector<std::vector<std::uint32_t>> host;
      auto in = inputs<std::uint32_t>(2, n, seed += 10, host);
      const auto want = reference(host, op);
      std::vector<std::uint32_t> got(n);
      reduce(in, std::span<std::uint32_t>(got), op);
      expect_close(got, want, "reduce " + op.name + " of 16 MiB to the host");
      std::vector<device_array<std::uint32_t>> out;
      if (in_place)
        out = in;
      else
        for (std::size_t d = 0; d < 2; ++d)
          out.emplace_back(rt(), topo()[d], n, "out" + std::to_string(d));
      all_reduce(in, out, op);
      for (std::size_t d = 0; d < 2; ++d)
        expect_close(read(out[d]), want, "all_reduce " + op.name + " of 16 MiB" + (in_place ? " in place" : ""));
    }
}

// rusticl's buffers are combined through a map. Two views of one buffer in a call (an input and
// an output side by side) share one mapping, each at its own offset.
TEST_F(Collectives, AnInputAndAnOutputInOneCpuBufferAreEachCombinedInPlace) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (RUSTICL_ENABLE=llvmpipe)");
  const std::size_t n = 1000;
  std::vector<std::vector<std::uint32_t>> host;
  auto in = inputs<std::uint32_t>(1, n, 77, host); // on device 0
  device_array<std::uint32_t> both(rt(), topo()[*rusticl], 2 * n, "both");
  host.push_back(values<std::uint32_t>(n, 78));
  both.sub(0, n).write(host.back());
  device_array<std::uint32_t> out0(rt(), topo()[0], n, "out0");
  for (const bool mapped : {true, false}) {
    collective_options o = called(mapped ? "mapped" : "copied");
    o.map_cpu_buffers = mapped;
    all_reduce({in[0], both.sub(0, n)}, {out0, both.sub(n, n)}, reduction<std::uint32_t>::sum(), o);
    const auto want = reference(host, reduction<std::uint32_t>::sum());
    expect_close(read(out0), want, o.name + ": device 0");
    expect_close(read(both.sub(n, n)), want, o.name + ": the second half of rusticl's buffer");
    expect_close(read(both.sub(0, n)), host.back(), o.name + ": the input half, unchanged");
  }
}

TEST_F(Collectives, ReduceToADeviceAndToTheHost) {
  std::uint32_t seed = 500;
  for (std::size_t k = 1; k <= topo().size(); ++k)
    for (const auto n : sizes)
      for (const auto& op : every_operation<std::uint32_t>()) {
        std::vector<std::vector<std::uint32_t>> host;
        auto in = inputs<std::uint32_t>(k, n, seed += 10, host);
        const auto want = reference(host, op);
        std::vector<std::uint32_t> got(n);
        reduce(in, std::span<std::uint32_t>(got), op);
        expect_close(got, want, "reduce " + op.name + " to the host on " + std::to_string(k) + " devices");
        device_array<std::uint32_t> root(rt(), topo()[k - 1], n, "root");
        reduce(in, root, op);
        expect_close(read(root), want, "reduce " + op.name + " to " + topo()[k - 1].label());
        reduce(in, in[k - 1], op); // the root is one of the inputs
        expect_close(read(in[k - 1]), want, "reduce " + op.name + " into an input");
      }
}

TEST_F(Collectives, ReduceScatterAndAllGatherSplitAndJoinTheParts) {
  std::uint32_t seed = 900;
  for (std::size_t k = 1; k <= topo().size(); ++k)
    for (const auto n : sizes)
      for (const auto& op : every_operation<std::uint32_t>()) {
        std::vector<std::vector<std::uint32_t>> host;
        auto in = inputs<std::uint32_t>(k, n * k, seed += 10, host);
        const auto want = reference(host, op);
        std::vector<device_array<std::uint32_t>> parts, joined;
        for (std::size_t d = 0; d < k; ++d) {
          parts.emplace_back(rt(), topo()[d], n, "part" + std::to_string(d));
          joined.emplace_back(rt(), topo()[d], n * k, "joined" + std::to_string(d));
        }
        reduce_scatter(in, parts, op);
        for (std::size_t d = 0; d < k; ++d)
          expect_close(read(parts[d]),
                       std::vector<std::uint32_t>(want.begin() + static_cast<std::ptrdiff_t>(d * n),
                                                  want.begin() + static_cast<std::ptrdiff_t>((d + 1) * n)),
                       "reduce_scatter " + op.name + " part " + std::to_string(d));
        all_gather(parts, joined);
        for (std::size_t d = 0; d < k; ++d)
          expect_close(read(joined[d]), want, "all_gather after reduce_scatter, device " + std::to_string(d));
      }
}

TEST_F(Collectives, BroadcastGatherAndScatterMoveEveryElement) {
  std::uint32_t seed = 1300;
  for (std::size_t k = 1; k <= topo().size(); ++k)
    for (const auto n : sizes) {
      std::vector<std::vector<std::uint32_t>> host;
      auto in = inputs<std::uint32_t>(k, n, seed += 10, host);
      std::vector<std::uint32_t> all;
      for (const auto& h : host)
        all.insert(all.end(), h.begin(), h.end());
      std::vector<std::uint32_t> got(n * k);
      gather(in, std::span<std::uint32_t>(got));
      expect_close(got, all, "gather to the host");
      device_array<std::uint32_t> together(rt(), topo()[0], n * k, "together");
      gather(in, together);
      expect_close(read(together), all, "gather to a device");
      std::vector<device_array<std::uint32_t>> back;
      for (std::size_t d = 0; d < k; ++d)
        back.emplace_back(rt(), topo()[d], n, "back" + std::to_string(d));
      scatter(together, back);
      for (std::size_t d = 0; d < k; ++d)
        expect_close(read(back[d]), host[d], "scatter part " + std::to_string(d));
      broadcast(in[k - 1], back);
      for (std::size_t d = 0; d < k; ++d)
        expect_close(read(back[d]), host[k - 1], "broadcast to device " + std::to_string(d));
    }
}

// Device 1 fails its part of the last step (after the reduce-scatter where the collective has
// one), on every path: through the host, the shared pass, and kernels on each device.
TEST_F(Collectives, ADeviceThatFailsMidCollectiveEndsItNamingTheDevice) {
  if (topo().size() < 2) GTEST_SKIP() << "one device: no peer to fail mid-collective";
  const std::size_t n = (std::size_t{1} << 20) + 7;
  for (const auto& op : {reduction<std::uint32_t>::sum(), reduction<std::uint32_t>::custom("on devices", "a + b")}) {
    std::vector<std::vector<std::uint32_t>> host;
    auto in = inputs<std::uint32_t>(topo().size(), n, 77, host);
    std::vector<std::string> steps;
    collective_options o;
    o.name = "injected";
    o.before_step = [&](const device& d, std::string_view step) {
      steps.emplace_back(step);
      if (d.index() == 1 && step != "reduce-scatter") throw std::runtime_error("injected failure");
    };
    expect_error([&] { all_reduce(in, op, o); }, make_error_code(errc::device_failed),
                 {"all_reduce 'injected'", topo()[1].label(), "injected failure"},
                 "an all-reduce with a failing device finished");
    EXPECT_FALSE(steps.empty());
  }
}

TEST_F(Collectives, ADeviceThatDoesNotContributeInTimeIsNamed) {
  if (topo().size() < 2) GTEST_SKIP() << "one device: a reduce of one array combines nothing, so nothing is late";
  std::vector<std::vector<float>> host;
  auto in = inputs<float>(topo().size(), 1, 5, host);
  // A combine that takes about a second: the device cannot finish within 20 ms.
  const auto slow = reduction<float>::custom(
      "slow", "({ volatile int k = 0; for (int i = 0; i < 30000000; ++i) k += 1; a + b + (float)(k - k); })");
  collective_options o;
  o.name = "late";
  o.timeout = 20ms;
  o.one_shot_bytes = 0;
  expect_error([&] { reduce(in, in[0], slow, o); }, make_error_code(errc::timeout),
               {"reduce 'late'", topo()[0].label(), "did not finish its part within 20 ms"},
               "a combine that takes a second finished within 20 ms");
}

TEST_F(Collectives, BadOperationsAndSizesAreRefusedBeforeAnythingMoves) {
  std::vector<std::vector<std::uint32_t>> host;
  auto in = inputs<std::uint32_t>(topo().size(), 100, 3, host);
  try {
    all_reduce(in, reduction<std::uint32_t>::custom("broken", "a +* b"), called("bad op", 0));
    FAIL() << "an operation that does not compile was used";
  } catch (const build_error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce 'bad op' operation 'broken'"), std::string::npos) << e.what();
    EXPECT_FALSE(e.build_log().empty());
  }
  std::vector<device_array<std::uint32_t>> out;
  for (std::size_t d = 0; d < in.size(); ++d)
    out.emplace_back(rt(), topo()[d], d == 0 ? 99 : 100, "out" + std::to_string(d));
  expect_error([&] { all_reduce(in, out, reduction<std::uint32_t>::sum(), called("sizes")); },
               make_error_code(errc::invalid_argument), {"all_reduce 'sizes'", "array 'out0'", "396 bytes", "400"},
               "outputs of the wrong size were taken");
  EXPECT_EQ(read(in[0]), host[0]) << "a refused call changed its inputs";
}
