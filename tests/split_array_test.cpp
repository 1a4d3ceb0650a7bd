// Split arrays over every device of the environment (PoCL, PoCL x2, PoCL x2 + rusticl): the
// layout (block, weighted, cyclic) covers every index once, pieces and halos hold what the host
// wrote, parallel_for runs each piece on the device that holds it with nothing copied (cyclic
// pieces too, the global index rebuilt from piece_origin, piece_grain and piece_stride), halo exchanges make a
// stencil equal its serial reference, a redistribution moves elements device to device (through
// the host only for many small blocks), weights follow measured speeds, a failed device's piece
// moves only to a device that reaches its memory, and bad calls are refused before anything runs.
#include "device_fixture.hpp"

#include <ringpipe/split_array.hpp>

#include <numeric>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

const char* const kernels = R"(
// y[i] = a * x[i] + the global index.
__kernel void scale_add_index(__global const int* x, __global int* y, int a, long origin) {
  const size_t i = get_global_id(0);
  y[i] = a * x[i] + (int)(origin + (long)i);
}
// The same over any layout: the global index from the piece's origin, grain and stride.
__kernel void scale_add_global(__global const int* x, __global int* y, int a, long origin, long grain, long stride) {
  const long i = (long)get_global_id(0);
  y[i] = a * x[i] + (int)(origin + (i / grain) * stride + i % grain);
}
// A 3-point sum; outside [0, n) counts as 0.
__kernel void stencil(__global const int* x, __global int* y, long origin, ulong n) {
  const size_t i = get_global_id(0);
  const long g = origin + (long)i;
  const int left = g == 0 ? 0 : x[i - 1], right = g + 1 == (long)n ? 0 : x[i + 1];
  y[i] = (left + x[i] + right) % 1000003;
}
)";

std::vector<int> pattern(std::size_t n) {
  std::vector<int> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<int>((i * 7919) % 10007);
  return v;
}

class SplitArray : public ringpipe::testing::device_test {
protected:
  static std::vector<double> rising_weights() {
    std::vector<double> w;
    for (std::size_t d = 0; d < topo().size(); ++d)
      w.push_back(static_cast<double>(d + 1));
    return w;
  }
  static std::uint64_t copies_now() { return rt().transfers().total_copies(); }
};

TEST_F(SplitArray, TheLayoutCoversEveryIndexOnceAndStoresPiecesInOrder) {
  for (const partitioner& how : {partitioner(block_partition{}), partitioner(weighted_partition{rising_weights()}),
                                 partitioner(cyclic_partition{1}), partitioner(cyclic_partition{1000})})
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, (std::size_t{1} << 20) + 3}) {
      const split_layout layout(rt(), n, {how}, "test");
      const auto* cyclic = std::get_if<cyclic_partition>(&how);
      std::vector<int> seen(n, 0);
      for (std::size_t p = 0; p < layout.pieces().size(); ++p) {
        const auto& piece = layout.pieces()[p];
        ASSERT_FALSE(piece.ranges.empty()) << describe(how) << " n=" << n;
        if (cyclic == nullptr) {
          ASSERT_EQ(piece.ranges.size(), 1u) << describe(how) << " n=" << n;
        }
        std::size_t position = 0;
        for (const index_range& r : piece.ranges) {
          ASSERT_FALSE(r.empty());
          if (cyclic != nullptr && &r != &piece.ranges.front()) { // the global index from origin and stride
            ASSERT_EQ(r.first, piece.ranges.front().first + (position / cyclic->grain) * layout.stride());
          }
          for (std::size_t i = r.first; i < r.last; ++i, ++position) {
            ++seen[i];
            ASSERT_EQ(layout.piece_of(i), p) << describe(how) << " n=" << n << " i=" << i;
            ASSERT_EQ(layout.position_of(i), position) << describe(how) << " n=" << n << " i=" << i;
          }
        }
        EXPECT_EQ(position, piece.size());
        if (p > 0 && cyclic == nullptr) {
          EXPECT_EQ(piece.ranges.front().first, layout.pieces()[p - 1].ranges.back().last);
        }
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(n)) << describe(how);
      const std::size_t blocks = cyclic ? (n + cyclic->grain - 1) / cyclic->grain : n;
      EXPECT_EQ(layout.pieces().size(), std::min(blocks, topo().size())) << describe(how) << " n=" << n;
    }
}

TEST_F(SplitArray, WhatTheHostWroteIsInThePiecesAndTheirHalos) {
  const std::size_t grain = 5;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, (std::size_t{1} << 20) + 3})
    for (const split_options& how :
         {split_options{}, split_options{.halo = 3}, split_options{.partition = cyclic_partition{grain}}}) {
      const bool cyclic = std::holds_alternative<cyclic_partition>(how.partition);
      const std::size_t halo = how.halo;
      const auto host = pattern(n);
      split_array<int> a(rt(), n, "a", how);
      a.write(host);
      std::vector<int> back(n, -1);
      a.read(back);
      ASSERT_EQ(back, host) << a.describe() << " n=" << n;
      for (std::size_t p = 0; p < a.layout().pieces().size(); ++p) {
        const split_piece& piece = a.layout().pieces()[p];
        std::vector<int> storage(piece.size() + 2 * halo);
        a.piece(p).read(storage);
        for (std::size_t k = 0; k < storage.size(); ++k) {
          const auto origin = static_cast<long>(piece.ranges.front().first) - static_cast<long>(halo);
          const auto global = cyclic ? origin + static_cast<long>((k / grain) * a.layout().stride() + k % grain)
                                     : origin + static_cast<long>(k);
          if (global < 0 || global >= static_cast<long>(n)) continue; // beyond the array's ends
          ASSERT_EQ(storage[k], host[static_cast<std::size_t>(global)])
              << a.describe() << " piece " << p << " position " << k;
        }
      }
    }
}

TEST_F(SplitArray, EachPieceRunsWhereItLivesAndNothingIsCopied) {
  const std::size_t n = (std::size_t{1} << 20) + 3;
  const auto host = pattern(n);
  split_array<int> x(rt(), n, "x", {.partition = weighted_partition{rising_weights()}});
  split_array<int> y(x.layout(), "y");
  x.write(host);
  const auto before = copies_now();
  const auto r = parallel_for(rt(), {kernels, "scale_add_index"}, n, x, y, 3, piece_origin);
  EXPECT_EQ(copies_now(), before) << "a run over split arrays copied data:\n" << rt().transfers().table();
  std::vector<int> out(n);
  y.read(out);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 3 * host[i] + static_cast<int>(i)) << "index " << i;
  ASSERT_EQ(r.devices.size(), topo().size());
  for (std::size_t p = 0; p < x.layout().pieces().size(); ++p) {
    const auto& piece = x.layout().pieces()[p];
    EXPECT_EQ(r.devices[piece.dev->index()].items, piece.size()) << r.table();
    EXPECT_LE(r.devices[piece.dev->index()].chunks, 2u) << r.table(); // a rounded chunk and its rest
  }
  EXPECT_NE(r.partition.find("split array 'x'"), std::string::npos) << r.partition;
  // An empty array: no pieces, nothing to run, nothing to exchange or move.
  split_array<int> none(rt(), 0, "none", {.halo = 1}), none_y(none.layout(), "none_y");
  EXPECT_TRUE(none.layout().pieces().empty());
  EXPECT_EQ(parallel_for(rt(), {kernels, "scale_add_index"}, 0, none, none_y, 3, piece_origin).items, 0u);
  none.exchange_halos();
  EXPECT_EQ(none.redistributed(none.layout(), "moved").size(), 0u);
}

TEST_F(SplitArray, AStencilWithHaloExchangesEqualsTheSerialOne) {
  const std::size_t n = 100003, steps = 20;
  auto expected = pattern(n);
  split_array<int> x(rt(), n, "x", {.halo = 1});
  split_array<int> y(x.layout(), "y");
  x.write(expected);
  parallel_kernel k(rt(), {kernels, "stencil"});
  const auto before = copies_now();
  for (std::size_t s = 0; s < steps; ++s) {
    k.run(n, s % 2 == 0 ? x : y, s % 2 == 0 ? y : x, piece_origin, cl_ulong{n});
    (s % 2 == 0 ? y : x).exchange_halos();
    std::vector<int> next(n);
    for (std::size_t i = 0; i < n; ++i)
      next[i] = ((i == 0 ? 0 : expected[i - 1]) + expected[i] + (i + 1 == n ? 0 : expected[i + 1])) % 1000003;
    expected.swap(next);
  }
  // Two copies per pair of neighbours per exchange, device to device, and nothing else.
  EXPECT_EQ(copies_now() - before, steps * 2 * (x.layout().pieces().size() - 1)) << rt().transfers().table();
  std::vector<int> out(n);
  (steps % 2 == 0 ? x : y).read(out);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], expected[i]) << "index " << i << " after " << steps << " steps";
}

TEST_F(SplitArray, ACyclicArrayRunsEachPieceWhereItLivesFromItsOriginAndStride) {
  const std::size_t n = (std::size_t{1} << 20) + 3, grain = 1000;
  const auto host = pattern(n);
  split_array<int> x(rt(), n, "x", {.partition = cyclic_partition{grain}});
  split_array<int> y(x.layout(), "y");
  x.write(host);
  const auto before = copies_now();
  const auto r = parallel_for(rt(), {kernels, "scale_add_global"}, n, x, y, 3, piece_origin, piece_grain, piece_stride);
  EXPECT_EQ(copies_now(), before) << "a run over split arrays copied data:\n" << rt().transfers().table();
  std::vector<int> out(n);
  y.read(out);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 3 * host[i] + static_cast<int>(i)) << "index " << i;
  for (const split_piece& piece : x.layout().pieces()) {
    EXPECT_EQ(r.devices[piece.dev->index()].items, piece.size()) << r.table();
    EXPECT_LE(r.devices[piece.dev->index()].chunks, 2u) << r.table(); // the whole piece: one launch and its rest
  }
}

TEST_F(SplitArray, RedistributedElementsMoveDeviceToDevice) {
  const std::size_t n = 300007;
  const auto host = pattern(n);
  std::vector<double> falling;
  for (std::size_t d = 0; d < topo().size(); ++d)
    falling.push_back(static_cast<double>(topo().size() - d));
  const split_layout to(rt(), n, {.partition = weighted_partition{falling}, .halo = 2});
  const auto host_rows = [] {
    std::uint64_t copies = 0;
    for (const auto& p : rt().transfers().pairs)
      copies += p.from == "host" || p.to == "host" ? p.copies : 0;
    return copies;
  };
  for (const split_options& from : {split_options{.halo = 1}, split_options{.partition = cyclic_partition{1000}}}) {
    split_array<int> x(rt(), n, "x", from);
    x.write(host);
    const auto before = host_rows();
    const auto y = x.redistributed(to, "y");
    EXPECT_EQ(host_rows(), before) << "a redistribution went through the host:\n" << rt().transfers().table();
    std::vector<int> back(n);
    y.read(back);
    ASSERT_EQ(back, host) << "from " << x.describe();
    for (std::size_t p = 0; p < to.pieces().size(); ++p) { // halos of 2 filled from the neighbours
      const index_range r = to.pieces()[p].ranges.front();
      std::vector<int> storage(r.size() + 4);
      y.piece(p).read(storage);
      if (p > 0) {
        EXPECT_EQ(storage[0], host[r.first - 2]) << "piece " << p;
      }
      if (p + 1 < to.pieces().size()) {
        EXPECT_EQ(storage[r.size() + 3], host[r.last + 1]) << "piece " << p;
      }
    }
    // Blocks of 7: more runs than device copies are worth, so the host takes them in bulk.
    const split_layout fine(rt(), n, {.partition = cyclic_partition{7}});
    const auto host_before = host_rows();
    const auto z = y.redistributed(fine, "z");
    if (fine.pieces().size() > 1) {
      EXPECT_GT(host_rows(), host_before) << rt().transfers().table();
    }
    std::fill(back.begin(), back.end(), -1);
    z.read(back);
    ASSERT_EQ(back, host) << "into " << z.describe();
  }
  split_array<int> x(rt(), n, "x"), other(rt(), n + 1, "other");
  expect_error([&] { x.copy_into(other, 1s); }, make_error_code(errc::invalid_argument),
               {"split array 'x'", "cannot be copied into", "split array 'other'"}, "a copy between sizes");
}

TEST(SplitWeights, EachPoolsFastestDeviceByItsMeasuredSpeed) {
  parallel_for_report r;
  r.name = "measured";
  r.devices = {{"a", 0, 0, 0, 10.0, {}, "host cores"},
               {"b", 0, 0, 0, 20.0, {}, "host cores"},
               {"c", 0, 0, 0, 5.0, {}, "device 2"},
               {"d", 0, 0, 0, 50.0, "failed", "device 3"},
               {"e", 0, 0, 0, 0.0, {}, "device 4"}};
  EXPECT_EQ(by_measured_speed(r).weights, (std::vector<double>{0, 1, 0.25, 0, 0}));
  r.devices = {{"a", 0, 0, 0, 0.0, {}, "host cores"}};
  expect_error([&] { (void)by_measured_speed(r); }, make_error_code(errc::invalid_argument),
               {"parallel_for 'measured'", "no device has a measured speed"}, "weights from no speed");
}

TEST_F(SplitArray, AFailedDevicesPieceRunsOnADeviceThatReachesItsMemory) {
  const auto pocl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_pocl);
  if (topo().size() < 2 || !topo()[1].shares_context_with(topo()[0]))
    GTEST_SKIP() << "needs two devices of one context: run with POCL_DEVICES=\"pthread pthread\"";
  ASSERT_TRUE(pocl.has_value());
  const std::size_t n = 50000;
  const auto host = pattern(n);
  for (const partitioner& how : {partitioner(block_partition{}), partitioner(cyclic_partition{4096})}) {
    split_options where{.partition = how, .devices = {0, 1}};
    split_array<int> x(rt(), n, "x", where);
    split_array<int> y(x.layout(), "y");
    x.write(host);
    parallel_for_options o;
    o.before_chunk = [](const device& d, index_range) {
      if (d.index() == 1) throw std::runtime_error("injected fault");
    };
    const auto r =
        parallel_for(rt(), {kernels, "scale_add_global"}, o, n, x, y, 2, piece_origin, piece_grain, piece_stride);
    std::vector<int> out(n);
    y.read(out);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], 2 * host[i] + static_cast<int>(i)) << x.describe() << " index " << i;
    EXPECT_EQ(r.devices[0].items, n) << r.table();
    EXPECT_NE(r.devices[1].failure.find("injected fault"), std::string::npos) << r.table();
  }
}

TEST_F(SplitArray, APieceNoDeviceLeftReachesFailsTheRunNamingIt) {
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  RINGPIPE_REQUIRE_DEVICE(rusticl, "rusticl device (a piece only its own device reaches)");
  const std::size_t n = 5000;
  split_array<int> x(rt(), n, "x"), y(x.layout(), "y");
  x.write(pattern(n));
  parallel_for_options o;
  o.name = "stranded";
  o.before_chunk = [&](const device& d, index_range) {
    if (d.index() == *rusticl) throw std::runtime_error("injected fault");
  };
  expect_error(
      [&] {
        parallel_for(rt(), {kernels, "scale_add_index"}, o, n, x, y, 2, piece_origin);
      },
      make_error_code(errc::device_failed),
      {"parallel_for 'stranded'", "of split array 'x'", "held by " + topo()[*rusticl].label(),
       "reached by no device left", "injected fault"},
      "a run whose piece no device could reach returned");
}

TEST_F(SplitArray, BadCallsAreRefusedBeforeAnythingRuns) {
  const auto invalid = make_error_code(errc::invalid_argument);
  expect_error([&] { split_array<int>(rt(), 100, "c", {.partition = cyclic_partition{4}, .halo = 1}); }, invalid,
               {"split array 'c'", "cyclic (grain 4)", "halo of 1", "contiguous pieces"}, "a cyclic array with a halo");
  expect_error([&] { split_array<int>(rt(), 100, "d", {.partition = dynamic_partition{}}); }, invalid,
               {"split array 'd'", "dynamic", "block, weighted or cyclic"}, "a dynamic split array");
  expect_error([&] { split_array<int>(rt(), 100, "e", {.devices = {99}}); }, invalid, {"no device 99"}, "device 99");
  if (topo().size() > 1)
    expect_error([&] { split_array<int>(rt(), 3, "h", {.halo = 2}); }, invalid, {"fewer than the halo (2)"},
                 "a piece smaller than its halo");
  split_array<int> x(rt(), 100, "x"), y(x.layout(), "y"), z(rt(), 99, "z");
  std::vector<int> host(100), short_host(99);
  expect_error([&] { x.write(short_host); }, invalid, {"split array 'x'", "holds 100 elements, given 99"}, "short");
  parallel_kernel k(rt(), {kernels, "scale_add_index"});
  expect_error([&] { k.run(100, x, z, 1, piece_origin); }, invalid, {"split array 'z'", "not laid out like"},
               "two layouts");
  expect_error([&] { k.run(100, x, output(host), 1, piece_origin); }, invalid, {"argument 1 (output)", "host arrays"},
               "a host array beside split arrays");
  expect_error([&] { k.run(99, x, y, 1, piece_origin); }, invalid, {"holds 100 elements; the range has 99"},
               "a range that is not the arrays'");
  expect_error([&] { k.run(100, input(host), output(host), 1, piece_origin); }, invalid,
               {"argument 3 (piece_origin)", "only runs over split arrays"}, "piece_origin over host arrays");
  expect_error([&] { k.run(100, input(host), output(host), 1, piece_grain); }, invalid,
               {"argument 3 (piece_grain)", "only runs over split arrays"}, "piece_grain over host arrays");
  if (topo().size() > 1) {
    parallel_for_options only_first;
    only_first.devices = {0};
    expect_error(
        [&] {
          parallel_for(rt(), {kernels, "scale_add_index"}, only_first, 100, x, y, 1, piece_origin);
        },
        invalid, {"has a piece on " + topo()[1].label(), "not built for"}, "a piece on another device");
  }
}

} // namespace
