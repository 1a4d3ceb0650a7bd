#pragma once
// The planner: from a declared graph and a topology to a plan value (placement, fusion, link
// kinds, budget), with no OpenCL call, so that it is tested against topologies a test describes.

#include "graph.hpp"

#include <ringpipe/plan.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ringpipe::detail {

struct planned_stage {
  std::optional<std::size_t> device;     ///< kernel stages
  std::optional<std::size_t> fused_into; ///< runs inside that stage's kernel
  std::vector<std::string> fused_with;   ///< stages this one's kernel also runs
  kernel_spec spec;                      ///< fused: the combined program and kernel name
  message_type out;                      ///< fused: the last fused stage's output
  std::vector<std::size_t> out_edges;    ///< fused: the last fused stage's connections
  kernel_options kernel_opts;            ///< the user's, with the mode the objective asks for
  bool mode_from_objective = false;
  bool prefer_parked = false;   ///< the runtime chooses its mode, but not persistent (residency.cpp)
  bool leave_when_idle = false; ///< prefer_parked and fed by host stages: a short idle budget
};

struct planned_link {
  std::size_t from = 0; ///< producing stage (the head of a fused kernel)
  link_kind kind = link_kind::direct;
  bool mover = false;                      ///< a host mover copies between a ring near each end
  std::optional<std::size_t> producer_dev; ///< a kernel that pushes into the link's ring itself
  std::optional<std::size_t> consumer_dev; ///< a kernel that pops from the link's ring itself
  std::uint32_t capacity = 0;              ///< ring slots
};

/// What the planner counts busy threads against (pipeline_objective::automatic).
struct host_capacity {
  unsigned cores = 1;           ///< the host's cores
  unsigned runtime_threads = 1; ///< the most io threads the runtime runs (runtime::thread_limit)
};

/// The io threads a pipeline asks of the runtime while it runs (runtime::hold_threads): one per
/// host stage (sources, host functions, sinks, merges, splits, movers) and one per kernel whose
/// proxy copies its batches (a device without shared memory: the mirror driver's copies run on
/// the proxy's thread), so that they all run at once where the host has the cores.
struct host_threads {
  std::size_t stages = 0;
  std::size_t copying_proxies = 0;
  /// Not empty: why the pipeline asks for one io thread instead (runtime::narrow_threads).
  std::string one_thread_reason;
  std::size_t total() const noexcept { return stages + copying_proxies; }
};

struct plan {
  pipeline_objective objective = pipeline_objective::latency; ///< never automatic: what was chosen
  std::string objective_reason;
  std::string parking_reason; ///< why kernels prefer parked; empty: none do
  std::vector<planned_stage> stages;
  std::vector<planned_link> links;
  std::vector<std::vector<std::size_t>> device_groups; ///< see pipeline_plan::device_groups
  host_threads threads;                                ///< io threads it holds while it runs
  pipeline_plan summary(const graph& g) const;
};

/// Threads a pipeline keeps busy under latency: kernels on CPU devices (their workers are host
/// threads: a resident kernel spins on one, a batched one runs its batches on them while a stream
/// flows), the runtime's threads while host stages (sources, host functions, sinks, merges,
/// splits, movers) have work, and one application thread at inlets and outlets.
struct busy_threads {
  std::size_t kernels = 0; ///< resident on CPU devices
  std::size_t batched = 0; ///< batched on CPU devices even under latency (forced, or no shared memory)
  std::size_t actors = 0;
  std::size_t runtime_busy = 0; ///< min(actors, the runtime's threads)
  bool application = false;
  std::size_t total() const noexcept { return kernels + batched + runtime_busy + (application ? 1 : 0); }
};
busy_threads count_busy_threads(const graph& g, const plan& p, const topology& topo, host_capacity host);
/// Throughput chosen by automatic: whether kernels on CPU devices that name no mode stay resident
/// rather than run batched. Host stages pace their sleeps under throughput, so together they take one core's
/// share rather than a core each: the kernels stay where the CPU devices' kernels, the
/// application thread and one thread for the host stages (if any) fit the cores and each such
/// kernel would go persistent (its pool keeps a worker free). Sets `why`. Not for farms.
bool resident_under_throughput(const graph& g, const plan& p, const topology& topo, host_capacity host,
                               std::string& why);
host_threads count_host_threads(const graph& g, const plan& p, const topology& topo);
/// A farm whose kernels on CPU devices count (count_busy_threads) as many busy threads as the host
/// has cores runs its host stages on one io thread: their turns follow its replicas' launches, and
/// a second thread would only wake on a core a worker runs on. Not beside a host function (user
/// compute that would hold up the dealer). Why, or empty where it does not.
std::string one_io_thread_reason(const graph& g, const plan& p, const topology& topo, host_capacity host);
/// "runtime threads asked for: 3 (2 host stages, 1 kernel whose proxy copies its batches)", or
/// the one thread and why.
/// Why the stages keep polling while nothing comes (empty where they sleep until a push: the
/// kernel offers the process-wide fence a promised wake needs).
std::string idle_polling_reason();
std::string describe_host_threads(std::size_t stages, std::size_t copying_proxies,
                                  const std::string& one_thread_reason);

/// Latency: where the busy threads exceed the host's cores and a CPU pool cannot keep all of the
/// pipeline's kernels of automatic mode persistent, all of them prefer parked (residency.cpp).
void park_where_pools_fall_short(const graph& g, const topology& topo, host_capacity host, plan& p);

/// Slots of a ring no one gave a capacity: pipeline_options::capacity, else 1,024 for latency
/// asked for and about 1 MiB (up to 65,536 slots) for throughput and automatic.
std::uint32_t default_capacity(const pipeline_options& options, pipeline_objective objective, std::size_t slot_size);

/// Messages per turn of a host stage or mover: pipeline_options::staging_batch, else 256 for
/// latency and up to 4,096 (about 1 MiB at most, 256 at least) for throughput.
std::uint32_t default_staging_batch(const pipeline_options& options, pipeline_objective objective,
                                    std::size_t msg_bytes);

/// Validates `g`, places its kernels, fuses adjacent map kernels (if asked), checks forced
/// persistent kernels against their pools' budgets, chooses every link's kind and applies the
/// objective (choosing it against `host` when automatic). Throws errc::invalid_pipeline or
/// errc::budget_exceeded naming the pipeline, stages and ports.
plan make_plan(const graph& g, const topology& devices, const pipeline_options& options, host_capacity host);

} // namespace ringpipe::detail
