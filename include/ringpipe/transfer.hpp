#pragma once
// What moved between memories: every array copy (host <-> device, device <-> device) counted per
// ordered pair of ends and path, runtime-wide. runtime::transfers() returns the report.

#include <ringpipe/link.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringpipe {

/// One ordered pair of ends and one path: "host" or a device label on each side.
struct transfer_stats {
  std::string from;
  std::string to;
  copy_path path = copy_path::shared;
  std::uint64_t copies = 0; ///< copies finished (successfully or not)
  std::uint64_t bytes = 0;  ///< bytes of the finished copies
  std::uint64_t failed = 0; ///< of those, copies that ended in an error
  double seconds = 0;       ///< summed from start to completion
};

struct transfer_report {
  std::vector<transfer_stats> pairs; ///< in the order each pair first moved bytes

  /// The row for `from` -> `to` on `path`, or null.
  const transfer_stats* find(std::string_view from, std::string_view to, copy_path path) const noexcept;
  std::uint64_t total_copies() const noexcept;
  std::uint64_t total_bytes() const noexcept;
  /// A fixed-width table: from, to, path, copies, bytes, GB/s.
  std::string table() const;
  std::string json() const;
};

} // namespace ringpipe
