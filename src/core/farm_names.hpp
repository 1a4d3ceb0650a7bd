#pragma once
// How a farm's stages are named: its dealer "farm:deal", its replicas "farm@k" (kernel stages)
// and its merger "farm:merge". The pipeline names them, metrics, rank placement and the dealer's
// errors read the farm's name back; one place keeps them agreeing.

#include <cstddef>
#include <string>
#include <string_view>

namespace ringpipe::detail {

inline constexpr std::string_view dealer_suffix = ":deal";
inline constexpr std::string_view merger_suffix = ":merge";

inline std::string dealer_name(std::string_view farm) { return std::string(farm) + std::string(dealer_suffix); }
inline std::string merger_name(std::string_view farm) { return std::string(farm) + std::string(merger_suffix); }
inline std::string replica_name(std::string_view farm, std::size_t k) {
  return std::string(farm) + "@" + std::to_string(k);
}

/// The farm a dealer or merger named `stage` belongs to; empty if the name is neither.
inline std::string_view farm_of(std::string_view stage) noexcept {
  for (const auto suffix : {dealer_suffix, merger_suffix})
    if (stage.size() > suffix.size() && stage.substr(stage.size() - suffix.size()) == suffix)
      return stage.substr(0, stage.size() - suffix.size());
  return {};
}

/// Whether `stage` is named as a replica of `farm` ("farm@k"); the caller checks it is a kernel.
inline bool named_as_replica_of(std::string_view stage, std::string_view farm) noexcept {
  return stage.size() > farm.size() + 1 && stage.substr(0, farm.size()) == farm && stage[farm.size()] == '@';
}

} // namespace ringpipe::detail
