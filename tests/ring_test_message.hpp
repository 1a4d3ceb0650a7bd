#pragma once
// The host rings' tests' message: a sequence number and a check word derived from it.

#include <cstdint>

namespace ring_testing {

struct msg {
  std::uint32_t seq;
  std::uint32_t check;
};
constexpr std::uint32_t check_of(std::uint32_t s) { return s * 2654435761u ^ 0x5bd1e995u; }

} // namespace ring_testing
