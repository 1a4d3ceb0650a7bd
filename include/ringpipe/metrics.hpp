#pragma once
// A snapshot of a running pipeline: per stage (traffic, queue fill, busy time, launches, mode,
// device) and per link (kind, traffic, batches), with a readable table and JSON.

#include <ringpipe/topology.hpp>
#include <ringpipe/transfer.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringpipe {

enum class stage_kind {
  source, ///< a host generator function
  host,   ///< a host function per message
  kernel, ///< a ring kernel
  sink,   ///< a host function consuming messages
  inlet,  ///< a ring the application pushes into
  outlet, ///< a ring the application pops from
  mover,  ///< inserted by the runtime: a staged copy, a merge into or a split out of a kernel
  dealer, ///< a farm's input side: queues per replica, stealing
  merger, ///< a farm's output side: results back in order
};
std::string_view to_string(stage_kind k) noexcept;

struct stage_metrics {
  std::string name;
  stage_kind kind = stage_kind::host;
  std::string device; ///< the device label for kernels, "host" otherwise
  std::string mode;   ///< kernel mode, or "actor" for host stages
  std::string state;  ///< running, finished, failed, ...
  std::uint64_t msgs_in = 0;
  std::uint64_t msgs_out = 0;
  std::uint32_t queue_fill = 0; ///< messages waiting in its input ring(s)
  std::uint32_t queue_capacity = 0;
  std::uint32_t queue_high_water = 0;
  double busy_s = 0;            ///< host stages: time spent in the stage's function
  std::uint64_t launches = 0;   ///< kernels: launches (1 for persistent; relaunches for parked/batched)
  std::uint64_t steals = 0;     ///< farm dealers: times a dry replica took from another's queue
  std::uint64_t stolen = 0;     ///< farm dealers: items those steals moved
  std::uint64_t rebalances = 0; ///< farm dealers: times a changed speed left the queues uneven and they were evened
  std::uint64_t rebalanced = 0; ///< farm dealers: items those rebalances moved
  /// Farm dealers: how evenly the replicas' queues would drain, max / mean over the replicas of
  /// the items queued for them over their speed (1: even, or nothing queued).
  double drain_imbalance = 1;
  /// Farm replicas: the items (with farm_options::cost, the cost) per second the dealer deals by,
  /// measured as the rate the replica
  /// takes items while it has some (0: not measured yet; the dealer then uses its device's
  /// compute units, scaled by the replicas measured).
  double intake_per_s = 0;
};

/// A barrier's counters (barrier::stats(); in pipeline_metrics for a pipeline's barriers).
struct barrier_participant_stats {
  std::string name;
  bool on_device = false;           ///< a ring kernel: it counts its own arrivals and waits
  std::uint64_t arrivals = 0;       ///< 32-bit counters for kernels
  std::uint64_t waits = 0;          ///< waits that were released (not failed)
  std::uint64_t last_to_arrive = 0; ///< phases in which the others waited for this one
  /// Host participants, over their last 4,096 waits (a kernel has no clock: not measured there).
  double wait_p50_us = 0;
  double wait_p99_us = 0;
};

struct barrier_stats {
  std::string name;
  std::uint64_t phases = 0; ///< phases completed (modulo 2^32)
  std::vector<barrier_participant_stats> participants;
  /// One line per participant: arrivals, waits, wait p50/p99, phases it was last to arrive.
  std::string table() const;
};

struct link_metrics {
  std::string from; ///< "stage.out"
  std::string to;   ///< "stage.in"
  link_kind kind = link_kind::direct;
  bool forced = false;        ///< the kind was forced by the application
  std::uint64_t messages = 0; ///< delivered over the link
  std::uint64_t bytes = 0;
  std::uint64_t batches = 0;  ///< staged links: batches copied (by a host mover, and by each kernel end
                              ///< on a device without shared memory, one per launch)
  std::uint32_t capacity = 0; ///< ring slots on the link (both rings for a staged link)
  std::uint32_t high_water = 0;
};

struct pipeline_metrics {
  std::vector<stage_metrics> stages;
  std::vector<link_metrics> links;
  std::uint32_t direct_links = 0;
  std::uint32_t staged_links = 0;
  std::uint32_t fused_links = 0; ///< stages run in one kernel: no ring, messages not counted
  std::uint64_t copies = 0;      ///< batches copied through host memory: the sum of the links' batches
  double elapsed_s = 0;          ///< since start()
  /// The staged links' copies summed per ordered pair of ends ("host" or a device label; path
  /// staged; copies = batches, bytes = the links' bytes; not timed). Array copies the application
  /// makes itself are in runtime::transfers().
  transfer_report transfers;
  /// The pipeline's barriers (add_barrier): phases, and per participant arrivals and waits.
  std::vector<barrier_stats> barriers;

  /// The row of stage `name` (movers by their name too), or null.
  const stage_metrics* stage(std::string_view name) const noexcept;
  /// The row of the link from port `from` ("a.out") to port `to` ("b.in"), or null.
  const link_metrics* link(std::string_view from, std::string_view to) const noexcept;
  /// How unevenly farm `farm`'s replicas are loaded now: the most items queued for one replica
  /// over the mean (1: even, or nothing queued, or no such farm). Stealing keeps it near 1.
  double farm_imbalance(std::string_view farm) const noexcept;
  /// A fixed-width table, one row per stage and per link.
  std::string table() const;
  std::string json() const;
};

/// What pipeline::stop() left behind. Actors never pop a message they cannot push, and kernels
/// publish a round's results with its input, so after a stop every message not yet delivered
/// waits in exactly one ring.
struct stop_report {
  struct queued {
    std::string ring; ///< the ring's name ("stage.in", "a.out->b.in" ...)
    std::uint64_t messages = 0;
  };
  struct held {
    std::string stage; ///< a kernel stage that failed
    std::uint64_t messages = 0;
  };
  std::uint64_t undelivered = 0;
  std::vector<queued> rings; ///< the rings that still hold messages
  /// Taken by failed stages and never passed on: what a kernel held when it faulted
  /// (kernel_stats::lost), the message a host function threw on.
  std::uint64_t lost = 0;
  std::vector<held> lost_in;
  /// "3 messages undelivered: 2 in ring 'x', 1 in ring 'y'" or "nothing undelivered", then
  /// "; 1 lost in stage 'k' (held by it when it failed)" for each failed stage.
  std::string text() const;
};

} // namespace ringpipe
