#include <ringpipe/error.hpp>
#include <ringpipe/link.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/placement.hpp>

#include <algorithm>
#include <string>
#include <tuple>

namespace ringpipe {

std::size_t placement_policy::place(std::string_view stage, const topology&, std::span<const std::uint32_t>) const {
  throw error(errc::invalid_pipeline,
              "stage '" + std::string(stage) + "': the placement policy overrides neither form of place()");
}

std::size_t freest_device::place(const placement_request& r) const {
  const auto& devices = r.devices;
  auto score = [&](std::size_t i) {
    const bool direct = std::all_of(r.neighbours.begin(), r.neighbours.end(), [&](std::size_t n) {
      return choose_link(devices[n], devices[i]) == link_kind::direct;
    });
    const auto& b = devices[i].budget();
    const auto free = static_cast<long>(b.budget()) - static_cast<long>(b.persistent_in_use());
    const double load = static_cast<double>(r.placed[i]) / std::max(1u, devices[i].info().compute_units);
    return std::tuple<bool, long, double>{direct, free, -load};
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < devices.size(); ++i)
    if (score(i) > score(best)) best = i;
  return best;
}

std::size_t freest_device::place(std::string_view stage, const topology& devices,
                                 std::span<const std::uint32_t> placed) const {
  return place(placement_request{stage, devices, placed, {}});
}

} // namespace ringpipe
