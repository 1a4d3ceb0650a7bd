// Static partitions: every index of [0, n) exactly once, for block, cyclic and weighted splits
// over 1, 2 and 3 parts and the awkward sizes (0, 1, primes, fewer items than parts).
#include <ringpipe/error.hpp>
#include <ringpipe/partition.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace {

using ringpipe::index_range;

void expect_exact_cover(const std::vector<std::vector<index_range>>& parts, std::size_t n, std::size_t count,
                        const std::string& what) {
  ASSERT_EQ(parts.size(), count) << what;
  std::vector<int> seen(n, 0);
  for (const auto& ranges : parts)
    for (std::size_t k = 0; k < ranges.size(); ++k) {
      const auto& r = ranges[k];
      ASSERT_LT(r.first, r.last) << what << ": an empty range";
      ASSERT_LE(r.last, n) << what;
      if (k > 0) {
        EXPECT_LE(ranges[k - 1].last, r.first) << what << ": ranges of a part out of order";
      }
      for (std::size_t i = r.first; i < r.last; ++i)
        ++seen[i];
    }
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[i], 1) << what << ": index " << i;
}

std::size_t items(const std::vector<index_range>& ranges) {
  std::size_t s = 0;
  for (const auto& r : ranges)
    s += r.size();
  return s;
}

const std::vector<std::size_t> sizes = {0, 1, 2, 3, 7, 97, 1000, 65537};

TEST(Partition, EveryIndexExactlyOnce) {
  for (std::size_t parts = 1; parts <= 3; ++parts)
    for (std::size_t n : sizes) {
      std::vector<double> weights;
      for (std::size_t p = 0; p < parts; ++p)
        weights.push_back(1.0 + 2.0 * static_cast<double>(p));
      for (const ringpipe::partitioner& how :
           {ringpipe::partitioner(ringpipe::block_partition{}), ringpipe::partitioner(ringpipe::cyclic_partition{}),
            ringpipe::partitioner(ringpipe::cyclic_partition{64}),
            ringpipe::partitioner(ringpipe::weighted_partition{weights})}) {
        const std::string what = describe(how) + " of " + std::to_string(n) + " over " + std::to_string(parts);
        expect_exact_cover(ringpipe::split(how, n, parts), n, parts, what);
      }
    }
}

TEST(Partition, BlockSizesDifferByAtMostOne) {
  const auto parts = ringpipe::split(ringpipe::block_partition{}, 10, 3);
  EXPECT_EQ(parts[0], (std::vector<index_range>{{0, 4}}));
  EXPECT_EQ(parts[1], (std::vector<index_range>{{4, 7}}));
  EXPECT_EQ(parts[2], (std::vector<index_range>{{7, 10}}));
  const auto few = ringpipe::split(ringpipe::block_partition{}, 2, 3);
  EXPECT_EQ(items(few[0]), 1u);
  EXPECT_EQ(items(few[1]), 1u);
  EXPECT_TRUE(few[2].empty());
}

TEST(Partition, CyclicDealsBlocksInTurn) {
  const auto parts = ringpipe::split(ringpipe::cyclic_partition{2}, 7, 2);
  EXPECT_EQ(parts[0], (std::vector<index_range>{{0, 2}, {4, 6}}));
  EXPECT_EQ(parts[1], (std::vector<index_range>{{2, 4}, {6, 7}}));
}

TEST(Partition, WeightedIsProportionalAndExact) {
  const auto parts = ringpipe::split(ringpipe::weighted_partition{{2.0, 1.0}}, 1000, 2);
  EXPECT_EQ(parts[0], (std::vector<index_range>{{0, 667}}));
  EXPECT_EQ(parts[1], (std::vector<index_range>{{667, 1000}}));
  // A part of weight 0 gets nothing, even when rounding leaves indices over.
  const auto zero = ringpipe::split(ringpipe::weighted_partition{{1.0, 0.0, 1.0}}, 7, 3);
  EXPECT_TRUE(zero[1].empty());
  EXPECT_EQ(items(zero[0]) + items(zero[2]), 7u);
  for (std::size_t n : sizes) {
    const auto p = ringpipe::split(ringpipe::weighted_partition{{3.0, 1.0}}, n, 2);
    const double share = static_cast<double>(items(p[0])) - 0.75 * static_cast<double>(n);
    EXPECT_LE(std::abs(share), 1.0) << n;
  }
}

TEST(Partition, BadSplitsAreRefusedNamingThePartition) {
  auto refused = [](const ringpipe::partitioner& p, std::size_t parts, const std::string& says) {
    try {
      (void)ringpipe::split(p, 10, parts);
      ADD_FAILURE() << describe(p) << " over " << parts << " was not refused";
    } catch (const ringpipe::error& e) {
      EXPECT_EQ(e.code(), ringpipe::make_error_code(ringpipe::errc::invalid_argument));
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(ringpipe::block_partition{}, 0, "no parts");
  refused(ringpipe::cyclic_partition{0}, 2, "grain of 0");
  refused(ringpipe::weighted_partition{{1.0}}, 2, "1 weights for 2 parts");
  refused(ringpipe::weighted_partition{{1.0, -1.0}}, 2, ">= 0");
  refused(ringpipe::weighted_partition{{0.0, 0.0}}, 2, "add up to 0");
  refused(ringpipe::dynamic_partition{}, 2, "only parallel_for");
}

} // namespace
