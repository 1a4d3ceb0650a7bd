#pragma once
// The devices a coordination call runs on, as its options name them.

#include <ringpipe/runtime.hpp>

#include <string>
#include <vector>

namespace ringpipe::detail {

/// The devices at `positions` in runtime::devices() (every device when empty). Refused
/// (errc::invalid_argument / no_device, naming `what`): a position past the end, one named twice,
/// a runtime without devices.
inline std::vector<const device*> devices_named(runtime& rt, const std::vector<std::size_t>& positions,
                                                const std::string& what) {
  std::vector<const device*> out;
  if (rt.devices().size() == 0) throw error(errc::no_device, what + ": the runtime has no device");
  for (std::size_t i = 0; i < (positions.empty() ? rt.devices().size() : positions.size()); ++i) {
    const std::size_t at = positions.empty() ? i : positions[i];
    if (at >= rt.devices().size())
      throw error(errc::invalid_argument, what + ": no device " + std::to_string(at) + " (the runtime has " +
                                              std::to_string(rt.devices().size()) + ")");
    for (const device* d : out)
      if (d->index() == at)
        throw error(errc::invalid_argument, what + ": device " + std::to_string(at) + " named twice");
    out.push_back(&rt.device_at(at));
  }
  return out;
}

} // namespace ringpipe::detail
