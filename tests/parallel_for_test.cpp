// parallel_for and parallel_map over every device of the environment (PoCL, PoCL x2, PoCL x2 +
// rusticl): results equal a host reference for every partition and awkward sizes, every index
// runs in exactly one chunk that did not fail, a slow device's share shrinks within three
// chunks, a device that fails hands its chunks to the others and is named, and bad calls are
// refused before anything runs.
#include "device_fixture.hpp"

#include <ringpipe/parallel_for.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

// y[i] = a * x[i] + y0[i] + delay-loop noise that leaves the value alone.
const char* const saxpy_source = R"(
__kernel void saxpy(__global const float* x, __global const float* y0, __global float* y, float a, uint delay) {
  const size_t i = get_global_id(0);
  float v = a * x[i] + y0[i];
  float z = 0.0f;
  // Sixteen steps per iteration: llvmpipe ends a launch's loops once 65535 iterations have run in
  // a group of work-items, which would make the delayed device fast again.
#define STEP4 z = z * 0.5f + 1.0f; z = z * 0.5f + 1.0f; z = z * 0.5f + 1.0f; z = z * 0.5f + 1.0f;
  for (uint k = 0; k < delay; k += 16) { STEP4 STEP4 STEP4 STEP4 }
  y[i] = v + (z > 1e30f ? 1.0f : 0.0f);
}
// Reads neighbours from a whole input: a 3-point sum with the ends clamped.
__kernel void smooth(__global const int* all, __global int* out, ulong n) {
  const size_t i = get_global_id(0);
  const int left = all[i == 0 ? 0 : i - 1], right = all[i + 1 == n ? i : i + 1];
  out[i] = left + all[i] + right;
}
__kernel void group_size(__global uint* out) { out[get_global_id(0)] = (uint)get_local_size(0); }
)";

class ParallelFor : public ringpipe::testing::device_test {
protected:
  static std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = scale * static_cast<float>(i % 1000);
    return v;
  }
  static void expect_saxpy(const std::vector<float>& x, const std::vector<float>& y0, const std::vector<float>& y,
                           float a, const std::string& what) {
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], a * x[i] + y0[i]) << what << ": index " << i;
  }
  /// Every index in exactly one chunk that ended well; failed chunks ran again elsewhere.
  static void expect_exactly_once(const parallel_for_report& r, std::size_t n) {
    std::vector<int> seen(n);
    for (const auto& c : r.chunks)
      if (!c.failed)
        for (std::size_t i = c.range.first; i < c.range.last; ++i)
          ++seen[i];
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(seen[i], 1) << "index " << i << "\n" << r.table();
  }
};

TEST_F(ParallelFor, EqualsTheHostReferenceForEveryPartition) {
  const std::size_t devices = topo().size();
  std::vector<double> weights;
  for (std::size_t d = 0; d < devices; ++d)
    weights.push_back(static_cast<double>(d + 1));
  const partitioner partitions[] = {dynamic_partition{}, block_partition{}, cyclic_partition{4096},
                                    weighted_partition{weights}};
  for (const auto& how : partitions)
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100003}, std::size_t{1} << 20}) {
      const auto x = ramp(n, 0.5f), y0 = ramp(n, 2.0f);
      std::vector<float> y(n, -1.0f);
      parallel_for_options o;
      o.name = describe(how);
      o.partition = how;
      const auto r = parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(y0), output(y), 3.0f, 0u);
      expect_saxpy(x, y0, y, 3.0f, o.name + " n=" + std::to_string(n));
      expect_exactly_once(r, n);
      EXPECT_EQ(r.devices.size(), devices);
    }
}

TEST_F(ParallelFor, WholeInputsAndEmptyRanges) {
  const std::size_t n = 50001;
  std::vector<int> all(n);
  for (std::size_t i = 0; i < n; ++i)
    all[i] = static_cast<int>(i * 7 % 1013);
  std::vector<int> out(n);
  parallel_kernel k(rt(), {saxpy_source, "smooth"});
  k.run(n, whole_input(all), output(out), cl_ulong(n));
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], all[i == 0 ? 0 : i - 1] + all[i] + all[i + 1 == n ? i : i + 1]) << i;
  std::vector<int> none;
  const auto r = k.run(0, whole_input(all), output(none), cl_ulong(0));
  EXPECT_EQ(r.items, 0u);
}

TEST_F(ParallelFor, ParallelMapAppliesAnOpenClFunction) {
  const std::size_t n = 300007;
  std::vector<float> in(n), out(n);
  for (std::size_t i = 0; i < n; ++i)
    in[i] = static_cast<float>(i % 4096) * 0.25f;
  parallel_map<float, float>(rt(), "float square(float v) { return v * v; }", "square", in, out);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], in[i] * in[i]) << i;
}

/// A run of saxpy on PoCL and rusticl with rusticl made slow (`delay`: extra steps per index on
/// each); skips where the environment lacks one of them. llvmpipe runs the delay loop across eight
/// work-items at once and PoCL one at a time here, so a step costs rusticl up to twenty times less:
/// rusticl's delay is 320 times PoCL's to make it the slower device by a wide margin.
class SlowDevice : public ParallelFor {
protected:
  void SetUp() override {
    pocl_ = ringpipe::testing::find_device(topo(), ringpipe::testing::is_pocl);
    rusticl_ = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
    if (!pocl_ || !rusticl_) GTEST_SKIP() << "needs PoCL and rusticl (RUSTICL_ENABLE=llvmpipe)";
  }
  parallel_for_report run(bool share_cores, std::vector<cl_uint> delay) {
    const std::size_t n = std::size_t{1} << 20;
    const auto x = ramp(n, 1.0f), y0 = ramp(n, 1.0f);
    std::vector<float> y(n);
    parallel_for_options o;
    o.devices = {*pocl_, *rusticl_};
    // Short measuring chunks (n / 512 at most): the slow device's second one, sized before the other
    // device's speed is known, must end long before the run does.
    o.partition = dynamic_partition{.min_chunk = 64, .first_chunks = 512};
    o.cpu_devices_share_cores = share_cores;
    auto r = parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(y0), output(y), 1.0f,
                          per_device<cl_uint>{std::move(delay)});
    expect_saxpy(x, y0, y, 1.0f, "slow device");
    expect_exactly_once(r, n);
    return r;
  }
  static std::vector<chunk_record> in_issue_order(const parallel_for_report& r) {
    auto issued = r.chunks;
    std::sort(issued.begin(), issued.end(), [](const auto& a, const auto& b) { return a.issued < b.issued; });
    return issued;
  }
  std::optional<std::size_t> pocl_, rusticl_;
};

TEST_F(SlowDevice, OnSharedCoresItRunsOnlyItsMeasuringChunks) {
  // Both devices run on the host's cores: once their speeds are known (two chunks each), every
  // chunk goes to the fast one; running the slow one too would only take cores from it. Enough
  // work on the fast one that the slow one's measuring chunks end long before the run does.
  const auto r = run(true, {400u, 128000u});
  EXPECT_LT(r.share(1), r.share(0)) << r.table();
  std::size_t fast_after = 0;
  for (const auto& c : r.chunks) {
    if (c.device == 1) {
      EXPECT_TRUE(c.measuring) << "chunk [" << c.range.first << ", " << c.range.last << ")\n" << r.table();
    }
    fast_after += c.device == 0 && !c.measuring ? 1 : 0;
  }
  EXPECT_GT(fast_after, 0u) << r.table();
}

TEST_F(SlowDevice, OnCoresOfItsOwnBothRunTheSlowOneLess) {
  // Each device taken to have cores of its own: both run past their measuring chunks, the slow
  // one with the smaller share. (Here they do share the host's cores, so their measured speeds
  // are noisy; chunk_sizing_test checks that sizes follow speeds exactly.)
  const auto r = run(false, {400u, 128000u});
  EXPECT_LT(r.share(1), r.share(0)) << r.table();
  std::vector<std::size_t> sized(2);
  for (const auto& c : r.chunks)
    sized[c.device] += c.measuring ? 0 : 1;
  EXPECT_GT(sized[0], 0u) << r.table();
  EXPECT_GT(sized[1], 0u) << r.table();
}

// Whether PoCL and rusticl run chunks at once is decided from their worker threads against the
// host's cores: each running a thread per core (the usual environment) they share the cores; with
// a worker each (POCL_MAX_PTHREAD_COUNT=1, LP_NUM_THREADS=1: ctest parallel_for.own_cores) on two
// cores or more they each have one. RINGPIPE_EXPECT_CPU_CORES says which the environment is.
TEST_F(SlowDevice, WhetherTheyShareCoresIsDecidedFromTheirWorkers) {
  const char* expected = std::getenv("RINGPIPE_EXPECT_CPU_CORES");
  if (expected == nullptr) GTEST_SKIP() << "RINGPIPE_EXPECT_CPU_CORES (own or shared) is not set for this environment";
  const bool own = std::string(expected) == "own";
  if (own && rt().host_cores() < 2) GTEST_SKIP() << "one host core: two workers share it whatever they are limited to";
  const std::size_t n = std::size_t{1} << 16;
  const auto x = ramp(n, 1.0f), y0 = ramp(n, 2.0f);
  std::vector<float> y(n);
  const auto run_told = [&](std::optional<bool> share) {
    parallel_for_options o;
    o.devices = {*pocl_, *rusticl_};
    o.cpu_devices_share_cores = share;
    auto r = parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(y0), output(y), 1.0f, 0u);
    expect_saxpy(x, y0, y, 1.0f, r.cpu_cores);
    expect_exactly_once(r, n);
    return r;
  };
  const auto found = run_told(std::nullopt);
  EXPECT_NE(found.cpu_cores.find(own ? "each has cores of its own" : "they share the cores"), std::string::npos)
      << found.table();
  // Devices that share the cores are one pool (chunks to the fastest); otherwise each its own.
  EXPECT_EQ(found.devices[0].pool == found.devices[1].pool, !own) << found.table();
  // Told the opposite, the run does as told and says so.
  const auto told = run_told(own);
  EXPECT_EQ(told.cpu_cores, own ? "told they share the host's cores" : "told they have cores of their own");
  EXPECT_EQ(told.devices[0].pool == told.devices[1].pool, own) << told.table();
}

TEST_F(ParallelFor, EachDeviceRunsItsChunksInOneWorkGroupSize) {
  // One compiled variant per device: left to the implementation, PoCL picked a work-group size for
  // each chunk size and compiled each (100-140 ms with a cold cache, counted in the chunk's speed).
  const std::size_t n = 100000; // not a multiple of 64: the last chunk is a rest
  std::vector<std::uint32_t> sizes(n);
  const auto r = parallel_for(rt(), {saxpy_source, "group_size"}, parallel_for_options{}, n, output(sizes));
  expect_exactly_once(r, n);
  std::map<std::size_t, std::set<std::uint32_t>> seen; // per device
  std::size_t checked = 0, rest = 0;
  for (const auto& c : r.chunks) {
    if (c.failed || c.range.size() < 64) continue; // fewer items than any lane's group
    // The rest, fewer items than the device's group (up to 1,024 on a GPU), ends the run alone in
    // a size of its own; whole groups are powers of two of at least 64, and n is not a multiple.
    if (c.range.last == n && c.range.size() % 64 != 0) {
      rest = c.range.size();
      continue;
    }
    for (std::size_t i = c.range.first; i < c.range.last; ++i)
      seen[c.device].insert(sizes[i]);
    EXPECT_EQ(c.range.size() % sizes[c.range.first], 0u) << "chunk [" << c.range.first << ", " << c.range.last << ")";
    checked += c.range.size();
  }
  for (const auto& [dev, groups] : seen)
    EXPECT_EQ(groups.size(), 1u) << "device " << dev << " ran " << groups.size() << " work-group sizes\n" << r.table();
  EXPECT_LT(rest, 1024u) << r.table();
  EXPECT_GE(checked + rest, n - 64 * r.devices.size()) << r.table();
}

TEST_F(ParallelFor, AFailedDeviceHandsItsChunksToTheOthers) {
  if (topo().size() < 2) GTEST_SKIP() << "one device here: run with POCL_DEVICES=\"pthread pthread\"";
  const std::size_t n = 200000;
  const auto x = ramp(n, 1.0f), y0 = ramp(n, 3.0f);
  for (const partitioner& how : {partitioner(dynamic_partition{}), partitioner(cyclic_partition{10000})}) {
    std::vector<float> y(n);
    parallel_for_options o;
    o.partition = how;
    o.timeout = 20s;
    int chunks_on_one = 0;
    o.before_chunk = [&](const device& d, index_range) {
      if (d.index() == topo().size() - 1 && ++chunks_on_one == 1) throw std::runtime_error("injected fault");
    };
    const auto r = parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(y0), output(y), 2.0f, 0u);
    expect_saxpy(x, y0, y, 2.0f, describe(how) + " with a failed device");
    expect_exactly_once(r, n);
    EXPECT_NE(r.devices.back().failure.find("injected fault"), std::string::npos) << r.table();
    EXPECT_NE(r.table().find("failed: chunk ["), std::string::npos) << r.table();
  }
}

TEST_F(ParallelFor, EveryDeviceFailingThrowsNamingThem) {
  const std::size_t n = 1000;
  const auto x = ramp(n, 1.0f);
  std::vector<float> y(n);
  parallel_for_options o;
  o.name = "doomed";
  o.before_chunk = [](const device&, index_range) { throw std::runtime_error("injected fault"); };
  expect_error(
      [&] {
        parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(x), output(y), 1.0f, 0u);
      },
      make_error_code(errc::device_failed),
      {"parallel_for 'doomed'", "every device failed", "injected fault", topo()[0].label()},
      "a run where every device failed returned");
}

TEST_F(ParallelFor, ATimeoutNamesTheRunningDevice) {
  const std::size_t n = 64;
  const auto x = ramp(n, 1.0f);
  std::vector<float> y(n);
  parallel_for_options o;
  o.name = "slow";
  o.timeout = 100ms;
  o.devices = {0};
  const auto start = std::chrono::steady_clock::now();
  // About a second of work per index on one device: late after 100 ms.
  expect_error(
      [&] {
        parallel_for(rt(), {saxpy_source, "saxpy"}, o, n, input(x), input(x), output(y), 1.0f, 20000000u);
      },
      make_error_code(errc::timeout), {"parallel_for 'slow'", "not done after 100 ms", topo()[0].label()},
      "a late run returned");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1100ms);
}

TEST_F(ParallelFor, BadCallsAreRefusedBeforeAnythingRuns) {
  const std::vector<float> x(10);
  std::vector<float> y(10), short_y(9);
  const auto invalid = make_error_code(errc::invalid_argument);
  parallel_kernel k(rt(), {saxpy_source, "saxpy"});
  expect_error([&] { k.run(10, input(x), output(y)); }, invalid, {"takes 5 arguments", "given 2"}, "wrong count");
  expect_error([&] { k.run(10, input(x), input(x), output(short_y), 1.0f, 0u); }, invalid,
               {"argument 2 (output) holds 9 elements", "range has 10"}, "short output");
  expect_error(
      [&] {
        k.run(10, input(x), input(x), output(y), 1.0f, per_device<cl_uint>{{1, 2, 3, 4, 5}});
      },
      invalid, {"argument 4 (per_device) holds 5 values"}, "per_device count");
  expect_error(
      [&] {
        parallel_kernel(rt(), {saxpy_source, "no_such_kernel", "", "my_kernels.cl"});
      },
      invalid, {"my_kernels.cl has no kernel named 'no_such_kernel'"}, "missing kernel");
  parallel_for_options o;
  o.devices = {99};
  expect_error([&] { parallel_kernel(rt(), {saxpy_source, "saxpy"}, o); }, invalid, {"no device 99"}, "device 99");
  try {
    const parallel_kernel built(
        rt(), {"__kernel void broken(__global int* p) {\n  p[0] = undeclared;\n}\n", "broken", "", "broken.cl"});
    ADD_FAILURE() << "a kernel that does not compile was built";
  } catch (const build_error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.cl:2"), std::string::npos) << e.what();
  }
}

TEST_F(ParallelFor, SpeedsCarryOverBetweenRuns) {
  const std::size_t n = 1 << 18;
  const auto x = ramp(n, 1.0f);
  std::vector<float> y(n);
  parallel_kernel k(rt(), {saxpy_source, "saxpy"});
  const auto first = k.run(n, input(x), input(x), output(y), 1.0f, 0u);
  const auto second = k.run(n, input(x), input(x), output(y), 1.0f, 0u);
  expect_saxpy(x, x, y, 1.0f, "second run");
  for (std::size_t d = 0; d < first.devices.size(); ++d)
    if (first.devices[d].chunks > 0) {
      EXPECT_GT(second.devices[d].items_per_second, 0.0) << second.table();
    }
}

} // namespace

// A whole input is written to every device that does not share the host's memory, also to one
// that then runs no chunk (here the run has one index): that write must end before the run's
// memory goes, even when the kernel is destroyed at once (the sanitizer builds catch the copy
// that read the freed staging).
TEST_F(ParallelFor, AWholeInputNoChunkWaitedForKeepsItsMemoryUntilWritten) {
  std::vector<int> all(std::size_t{16} << 20, 5), out(1);
  for (int round = 0; round < 3; ++round) {
    parallel_kernel smooth(rt(), {saxpy_source, "smooth"});
    const auto r = smooth.run(1, whole_input(all), output(out), cl_ulong(1));
    expect_exactly_once(r, 1);
    EXPECT_EQ(out[0], 15);
  }
}

// A kernel reuses its last run's memory for the next run of the same sizes: each run still sees
// its own inputs (chunked and whole), and a run of another size gets memory of its own.
TEST_F(ParallelFor, EachRunOfAKernelSeesItsOwnInputs) {
  const std::size_t n = 100003;
  parallel_kernel k(rt(), {saxpy_source, "saxpy"});
  for (const auto& [size, scale] :
       {std::pair{n, 0.5f}, std::pair{n, 3.0f}, std::pair{n / 2, 1.5f}, std::pair{n, 7.0f}}) {
    const auto x = ramp(size, scale), y0 = ramp(size, scale + 1.0f);
    std::vector<float> y(size, -1.0f);
    const auto r = k.run(size, input(x), input(y0), output(y), 2.0f, 0u);
    expect_saxpy(x, y0, y, 2.0f, "n=" + std::to_string(size) + " scale " + std::to_string(scale));
    expect_exactly_once(r, size);
  }
  parallel_kernel smooth(rt(), {saxpy_source, "smooth"});
  for (const int step : {7, 11}) {
    std::vector<int> all(n), out(n);
    for (std::size_t i = 0; i < n; ++i)
      all[i] = static_cast<int>(i * static_cast<std::size_t>(step) % 1013);
    smooth.run(n, whole_input(all), output(out), cl_ulong(n));
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], all[i == 0 ? 0 : i - 1] + all[i] + all[i + 1 == n ? i : i + 1]) << "step " << step << ", " << i;
  }
}
