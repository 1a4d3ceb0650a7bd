// Big host rings ask for transparent huge pages: their memory is 2 MiB aligned and advised before
// it is first touched.

#include <ringpipe/ring.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

constexpr std::uintptr_t two_mib = std::uintptr_t{2} << 20;

struct big_slot {
  std::byte bytes[4096];
};

std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode;
}

/// The "THPeligible" line of the mapping of /proc/self/smaps that holds `address`.
std::string thp_eligible(const void* address) {
  std::ifstream in("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    std::uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> from >> dash >> to && dash == '-') {
      inside = from <= at && at < to;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return line;
  }
  return "no mapping holds the ring";
}

TEST(RingPages, ABigHostRingIsAlignedForHugePagesAndAdvisedOntoThem) {
  ringpipe::ring<big_slot> big(1024); // 4 MiB of slots
  const auto* header = static_cast<const void*>(big.buffer().header());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(header) % two_mib, 0u);
  const std::string mode = thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    std::cout << "transparent huge pages are off here (" << (mode.empty() ? "no sysfs entry" : mode)
              << "): the advice is not checked\n";
    return;
  }
  EXPECT_NE(thp_eligible(header).find('1'), std::string::npos) << thp_eligible(header) << " (THP: " << mode << ")";
}

} // namespace
