#pragma once
// Buffer arrays of CPU devices mapped into the host for one host pass. A CPU device's buffer is
// host memory, and mapping it hands out that memory (rusticl's llvmpipe: 31 us whatever the size,
// where reading and writing back 4 MiB took 220 us), so the pass combines it in place like shared
// memory instead of copying it in and out. Buffers of other devices are not mapped: a map there
// is a copy, and the staged chunks overlap theirs.

#include "collective_steps.hpp"

#include <cstddef>
#include <vector>

namespace ringpipe::detail {

class host_mappings {
public:
  /// Maps every buffer array of a CPU device among `arrays` (none when `bytes` is 0), waiting for
  /// the maps until the run's deadline; a map that fails fails the run naming its device.
  host_mappings(collective_run& run, std::string_view step, const std::vector<array_bytes>& arrays);
  /// Unmaps what is still mapped (after a failure), waiting at most until the run's deadline.
  ~host_mappings();
  host_mappings(const host_mappings&) = delete;
  host_mappings& operator=(const host_mappings&) = delete;

  /// Where the host reaches `a`'s first byte through a mapping; null for an array not mapped.
  std::byte* where(const array_bytes& a) const;
  /// Unmaps every mapping and waits for it: the buffers hold what was written through them.
  void unmap();

private:
  struct mapping {
    array_bytes view;   ///< one view of the buffer (it keeps the buffer alive)
    std::size_t lo = 0; ///< the buffer's bytes mapped, [lo, hi): every view of it in the pass
    std::byte* at = nullptr;
  };
  collective_run& run_;
  std::string_view step_;
  std::vector<mapping> maps_;
};

} // namespace ringpipe::detail
