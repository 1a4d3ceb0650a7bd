// The tests' own kernels (tests/cl), embedded into the test support library at build time.

#include "test_message.hpp"

#include <ringpipe/detail/embedded_sources.hpp>

#include <stdexcept>

namespace ringpipe {
namespace detail {
std::span<const embedded_source> test_kernel_sources() noexcept; // generated from tests/cl
}

namespace {
std::string test_kernel_file(std::string_view path) {
  for (const auto& s : detail::test_kernel_sources())
    if (s.path == path) return std::string(s.text);
  throw std::logic_error("tests/cl/" + std::string(path) + " is not embedded");
}
} // namespace

std::string test_stages_source(std::size_t n) {
  return "#define RP_MSG_BYTES " + std::to_string(n) + "\n#line 1 \"tests/cl/test_map.cl\"\n" +
         test_kernel_file("test_map.cl");
}

std::string relaunch_baseline_source(std::size_t n) {
  return test_stages_source(n) + "\n#line 1 \"tests/cl/relaunch_baseline.cl\"\n" +
         test_kernel_file("relaunch_baseline.cl");
}

std::string test_phases_source() {
  return "#line 1 \"tests/cl/test_phases.cl\"\n" + test_kernel_file("test_phases.cl");
}

} // namespace ringpipe
