#pragma once
// The cl/ tree, embedded into the library at build time by cmake/embed_cl.cmake.

#include <span>
#include <string_view>

namespace ringpipe::detail {

struct embedded_source {
  std::string_view path; ///< relative to cl/, e.g. "ringpipe/ring.clh"
  std::string_view text;
};

std::span<const embedded_source> embedded_sources() noexcept;

} // namespace ringpipe::detail
