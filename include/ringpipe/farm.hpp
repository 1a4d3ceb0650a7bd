#pragma once
// A farm stage: one ring kernel replicated on several devices (pipeline::add_farm). A dealer
// numbers the items, deals each to the queue of the replica that would drain first (a
// load_balancer over the replicas, which learns how fast each takes items) or in turn, and feeds
// each replica's ring from its queue, about feed_ahead of its work at a time; a replica whose
// queue runs dry steals from the queue that would drain last as many items as even their drain
// times (half, between replicas of one speed; the items dealt last). When a replica's measured
// speed changes so that the queues would drain more than 1.2x apart (it slowed, and holds what
// was dealt for its old speed), the balancer's rebalance plan moves the excess at once. Given
// items' costs, each feed of a replica's ring goes in order of cost, so that SIMD lanes run items
// of like cost together. A merger gathers the results and, for an ordered farm, restores the
// input order. Every item is processed exactly once; the stage's metrics count steals and
// rebalances and show each replica's measured speed and how evenly the queues would drain.
//
//        +-> [queue 0] -> kernel on device 0 -+
//   in --+-> [queue 1] -> kernel on device 1 -+-> merge (in order) -> out
//   deal  (least loaded; a dry queue steals from the one that would drain last)

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

namespace ringpipe {

enum class farm_dealing {
  /// Each item to the replica whose queue would drain first, counting the item: (queued + 1) /
  /// speed, queued in the dealer (not yet in the replica's ring), the speed measured as the rate
  /// the replica takes items from its ring (a median over windows of at least a millisecond in
  /// which it always had items), its device's compute units before that. Queues grow in
  /// proportion to speed, so unequal devices finish together.
  least_loaded,
  /// Round robin, whatever the replicas' speeds (with `steal = false`: static dealing).
  in_turn,
};

struct farm_options {
  std::vector<std::size_t> devices = {}; ///< one replica per device (positions in the topology); empty: every device
  /// Results leave in the order items came in. Needs one result per item, in the order of the
  /// replica's input (a map kernel that drops nothing); a replica that returns a result too many
  /// or too few fails the pipeline, naming it.
  bool ordered = true;
  farm_dealing dealing = farm_dealing::least_loaded;
  /// false: items stay where they were dealt. true: a dry replica steals and, dealt least loaded,
  /// queues are evened when a changed speed leaves them more than 1.2x apart in drain time.
  bool steal = true;
  /// Items queued per replica (queue x replicas in all) before the dealer stops taking input;
  /// until a replica's speed is measured, each queues a first feed's worth (see feed_ahead).
  std::uint32_t queue = 4096;
  /// Slots of each replica's input ring (a power of two); 0: 2,048, fewer for large messages (4 MiB
  /// a ring at most, 256 slots at least). Items there can no longer be stolen: see feed_ahead.
  std::uint32_t ring = 0;
  /// A replica's ring is fed at most what the replica takes in this time at its measured speed,
  /// down to a power of two; at least 256 items (or its ring, where smaller), which is also what
  /// it is fed until its speed is known. Cheap items fill more of the ring, so that a launch
  /// takes more of them at a time; costly ones wait in the queue, where a replica that runs dry
  /// can still steal them.
  std::chrono::microseconds feed_ahead{2000};
  /// What an item costs, relative to the others (finite, > 0; empty: 1 each), from its bytes: set
  /// it with item_cost<In>(fn). Dealing counts it, speeds are measured in it per second, and
  /// steals even drain times by it, so a farm whose items' costs are known keeps unequal work
  /// even without moving items.
  std::function<double(const std::byte*)> cost = {};
  /// With `cost`: the items fed into a replica's ring at one time go in order of cost, so that
  /// items of like cost sit side by side and run in the same lanes of a warp or vector (one costly
  /// item among cheap ones holds its whole lane group for its run). The merger restores the input
  /// order either way. false: items go in as dealt.
  bool group_by_cost = true;
};

/// A farm_options::cost from `fn(const In&)` (an item's relative cost).
template <class In, class Fn> std::function<double(const std::byte*)> item_cost(Fn fn) {
  static_assert(std::is_trivially_copyable_v<In>, "farm items are trivially copyable");
  return [fn = std::move(fn)](const std::byte* bytes) {
    In item;
    std::memcpy(&item, bytes, sizeof item);
    return static_cast<double>(fn(item));
  };
}

} // namespace ringpipe
