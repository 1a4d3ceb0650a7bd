#pragma once
// A farm stage: one ring kernel replicated on several devices (pipeline::add_farm). A dealer
// numbers the items, deals them in turn to a queue per replica and feeds each replica's ring from
// its queue; a replica whose queue runs dry steals about half of the fullest other queue (the
// items dealt last). A merger gathers the results and, for an ordered farm, restores the input
// order. Every item is processed exactly once; the stage's metrics count steals.
//
//        +-> [queue 0] -> kernel on device 0 -+
//   in --+-> [queue 1] -> kernel on device 1 -+-> merge (in order) -> out
//   deal  (a dry queue steals half of the fullest)

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringpipe {

struct farm_options {
  std::vector<std::size_t> devices = {}; ///< one replica per device (positions in the topology); empty: every device
  /// Results leave in the order items came in. Needs one result per item, in the order of the
  /// replica's input (a map kernel that drops nothing); a replica that returns a result too many
  /// or too few fails the pipeline, naming it.
  bool ordered = true;
  bool steal = true;          ///< false: items stay where they were dealt (static dealing)
  std::uint32_t queue = 4096; ///< items a replica's queue holds before the dealer stops taking input
  std::uint32_t ring = 256;   ///< slots of each replica's input ring: items there can no longer be stolen
};

} // namespace ringpipe
