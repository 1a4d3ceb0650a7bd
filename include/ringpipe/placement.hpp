#pragma once
// Where kernel stages run: an explicit device per stage, or a placement policy for the rest.
// The default policy picks the device with the most free persistent workers, then the fewest
// kernels of this pipeline; an application replaces it through pipeline_options::placement.

#include <ringpipe/topology.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ringpipe {

/// Where one kernel stage runs: its device's index in the runtime's topology, or automatic.
struct placement {
  std::optional<std::size_t> device;
};
inline placement on_device(std::size_t index) { return placement{index}; }

class placement_policy {
public:
  virtual ~placement_policy() = default;
  /// The device index for kernel stage `stage`, which asked for none. `placed[i]` counts the
  /// kernels of this pipeline already placed on device i. Called once per such stage, in order of
  /// declaration, before anything is built; an index out of range is refused naming the stage.
  virtual std::size_t place(std::string_view stage, const topology& devices,
                            std::span<const std::uint32_t> placed) const = 0;
};

/// The default: most free persistent workers in the device's pool, then fewest kernels placed.
class freest_device final : public placement_policy {
public:
  std::size_t place(std::string_view stage, const topology& devices,
                    std::span<const std::uint32_t> placed) const override;
};

} // namespace ringpipe
