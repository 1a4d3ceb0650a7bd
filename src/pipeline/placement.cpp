#include <ringpipe/occupancy.hpp>
#include <ringpipe/placement.hpp>

#include <utility>

namespace ringpipe {

std::size_t freest_device::place(std::string_view, const topology& devices,
                                 std::span<const std::uint32_t> placed) const {
  auto score = [&](std::size_t i) {
    const auto& b = devices[i].budget();
    const auto free = static_cast<long>(b.budget()) - static_cast<long>(b.persistent_in_use());
    return std::pair<long, long>{free, -static_cast<long>(placed[i])};
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < devices.size(); ++i)
    if (score(i) > score(best)) best = i;
  return best;
}

} // namespace ringpipe
