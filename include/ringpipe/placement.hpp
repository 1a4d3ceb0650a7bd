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

/// What a placement policy is asked for one kernel stage that named no device.
struct placement_request {
  std::string_view stage;
  const topology& devices;
  std::span<const std::uint32_t> placed; ///< kernels of this pipeline already placed, per device
  /// The devices of the kernel stages already placed that this one exchanges messages with
  /// (a connection between the two, or through host stages only), one entry per such stage.
  std::span<const std::size_t> neighbours;
};

class placement_policy {
public:
  virtual ~placement_policy() = default;
  /// The device index for the stage. Called once per kernel stage that asked for none, in order of
  /// declaration, before anything is built; an index out of range is refused naming the stage.
  /// By default, the three-argument form (policies that do not look at neighbours).
  virtual std::size_t place(const placement_request& r) const { return place(r.stage, r.devices, r.placed); }
  /// Policies that look at the stage and the counts only. Throws errc::invalid_pipeline when a
  /// policy overrides neither form.
  virtual std::size_t place(std::string_view stage, const topology& devices,
                            std::span<const std::uint32_t> placed) const;
};

/// The default: a device that reaches every neighbour's device through a direct link (shared
/// memory: no copies) where there is one; among those the most free persistent workers in the
/// device's pool, then the fewest kernels placed per compute unit (spread by capability).
class freest_device final : public placement_policy {
public:
  std::size_t place(const placement_request& r) const override;
  std::size_t place(std::string_view stage, const topology& devices,
                    std::span<const std::uint32_t> placed) const override;
};

} // namespace ringpipe
