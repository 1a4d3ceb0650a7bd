#pragma once
// What authoring_test's files share: the host mirror of the kernels' item, and a source of them.

#include <CL/cl.h>

#include <cstdint>
#include <optional>

namespace ringpipe::testing {

struct item {
  cl_uint seq;
  cl_uint value;
};

/// A source function: items 0 .. count-1, each with its value equal to its number.
inline auto items(std::uint32_t count) {
  return [count, next = std::uint32_t{0}]() mutable -> std::optional<item> {
    if (next == count) return std::nullopt;
    const auto seq = next++;
    return item{seq, seq};
  };
}

} // namespace ringpipe::testing
