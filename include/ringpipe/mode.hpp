#pragma once
// How a ring kernel occupies its device.

#include <optional>
#include <string_view>

namespace ringpipe {

enum class kernel_mode {
  persistent, ///< launched once, polls its rings until stopped; needs fine-grained SVM + atomics
  parked,     ///< persistent while busy, exits after an idle budget, relaunched by the host on work
  batched,    ///< launched over each batch of queued messages; runs on every device
};

constexpr std::string_view to_string(kernel_mode m) noexcept {
  switch (m) {
  case kernel_mode::persistent: return "persistent";
  case kernel_mode::parked: return "parked";
  case kernel_mode::batched: return "batched";
  }
  return "?";
}

std::optional<kernel_mode> parse_kernel_mode(std::string_view text) noexcept;

} // namespace ringpipe
