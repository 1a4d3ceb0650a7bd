// What a parallel_kernel learns of its devices' speeds between runs, on two devices that share
// the host's cores (one pool: the fastest takes every chunk once both are measured). A device
// recorded slower than it has become is idle in the next run, measured again by one chunk in the
// run after, and takes the run's work once that chunk shows it faster. Two PoCL devices, so that
// a step of the delay loop costs both the same.
#include "device_fixture.hpp"

#include <ringpipe/parallel_for.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace ringpipe;

namespace {

// y[i] = x[i] after `steps` steps that leave it unchanged (0.5 * x + 0.5 * x is exact).
const char* const delayed_copy_source = R"(
__kernel void delayed_copy(__global const float* x, __global float* y, uint steps) {
  const size_t i = get_global_id(0);
  const float v = x[i];
  float z = v;
  for (uint k = 0; k < steps; ++k) z = z * 0.5f + 0.5f * v;
  y[i] = z;
}
)";

class ParallelSpeeds : public ringpipe::testing::device_test {
protected:
  void SetUp() override {
    for (const auto& d : topo().devices())
      if (ringpipe::testing::is_pocl(d)) pocl_.push_back(d.index());
    if (pocl_.size() < 2) GTEST_SKIP() << "needs two PoCL devices (POCL_DEVICES=\"pthread pthread\")";
  }
  std::vector<std::size_t> pocl_;
};

/// The items each device completed, and whether the second device's first chunk was a measuring one.
struct run_outcome {
  std::size_t items[2] = {0, 0};
  bool second_measured_first = false;
  double rate[2] = {0, 0};
  std::string table;
};

/// A parallel_kernel of delayed_copy on the two devices, run with each device's steps.
class delayed_copies {
public:
  delayed_copies(runtime& rt, std::vector<std::size_t> devices) : x_(n), y_(n) {
    parallel_for_options o;
    o.name = "idle device";
    o.devices = std::move(devices);
    o.cpu_devices_share_cores = true; // one pool whatever the environment's workers
    kernel_.emplace(rt, kernel_source{delayed_copy_source, "delayed_copy"}, o);
    for (std::size_t i = 0; i < n; ++i)
      x_[i] = static_cast<float>(i % 977);
  }
  run_outcome run(cl_uint first_steps, cl_uint second_steps) {
    std::fill(y_.begin(), y_.end(), -1.0f);
    const auto r = kernel_->run(n, input(x_), output(y_), per_device<cl_uint>{{first_steps, second_steps}});
    for (std::size_t i = 0; i < n; ++i)
      EXPECT_EQ(y_[i], x_[i]) << "index " << i;
    run_outcome out;
    std::size_t first_issued = SIZE_MAX;
    for (const auto& c : r.chunks) {
      out.items[c.device] += c.range.size();
      if (c.device == 1 && c.issued < first_issued) {
        first_issued = c.issued;
        out.second_measured_first = c.measuring;
      }
    }
    for (std::size_t d = 0; d < 2; ++d)
      out.rate[d] = r.devices[d].items_per_second;
    out.table = r.table();
    return out;
  }

private:
  static constexpr std::size_t n = std::size_t{1} << 18;
  std::optional<parallel_kernel> kernel_;
  std::vector<float> x_, y_;
};

TEST_F(ParallelSpeeds, AnIdleDeviceRecordedSlowerIsMeasuredAgainAndTakesOver) {
  // A first run measures both, the second at about 0.8 of the first's speed (2,500 steps an
  // element against 2,000). Then the second does 200 steps, ten times faster, but its record says
  // slower: it is idle for a run, while the first is measured as it runs. Measured on shared
  // cores (ctest runs other tests beside), the two records are now and then far off that ratio (1.17
  // once in ten runs alone, 0.41 once beside other tests): a kernel whose records, after the idle
  // run, do not say "slower, but not by half" is made again.
  std::optional<delayed_copies> k;
  std::string tries;
  for (int attempt = 0; attempt < 5 && !k; ++attempt) {
    k.emplace(rt(), pocl_);
    (void)k->run(2000, 2500);
    const auto idle = k->run(2000, 200);
    const double ratio = idle.rate[1] / idle.rate[0];
    if (idle.items[1] != 0 || ratio < 0.55 || ratio > 0.95) {
      tries += "\nafter the idle run: recorded speed ratio " + std::to_string(ratio) + "\n" + idle.table;
      k.reset();
    }
  }
  ASSERT_TRUE(k) << "the second device was never idle at 0.55-0.95 of the first's recorded speed:" << tries;
  // The next run measures it first, finds it the faster, and gives it the most of the run.
  const auto again = k->run(2000, 200);
  EXPECT_TRUE(again.second_measured_first) << again.table;
  EXPECT_GT(again.items[1], again.items[0]) << again.table;
}

} // namespace
