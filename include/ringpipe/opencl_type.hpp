#pragma once
// The OpenCL C names of the C++ element types kernels ringpipe generates work on.

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ringpipe {

/// The OpenCL C name of an element type (of collectives, parallel_map).
template <class T> constexpr std::string_view opencl_type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>)
    return "int";
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return "uint";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "long";
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return "ulong";
  else if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else
    static_assert(sizeof(T) == 0, "OpenCL C element types: int, uint, long, ulong, float or double");
}

} // namespace ringpipe
