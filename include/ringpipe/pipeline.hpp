#pragma once
// Pipelines: what users write. Stages (sources, host functions, ring kernels, sinks, and inlets
// and outlets the application drives itself) are declared, then their ports are connected; start()
// validates the graph, places kernels, chooses a link kind for every connection and launches.
//
//   pipeline p(rt);
//   auto gen = p.add_source<sample>("gen", [i = 0u]() mutable -> std::optional<sample> { ... });
//   auto scale = p.add_kernel<sample, sample>("scale", spec, on_device(0));
//   auto check = p.add_sink<sample>("check", [](const sample& s) { ... });
//   p.connect(gen.out(), scale.in());
//   p.connect(scale.out(), check.in());
//   p.run(); // or start() ... wait()

#include <ringpipe/cross_rank.hpp>
#include <ringpipe/detail/host_function.hpp>
#include <ringpipe/farm.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/metrics.hpp>
#include <ringpipe/placement.hpp>
#include <ringpipe/plan.hpp>
#include <ringpipe/ring.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

namespace ringpipe {

class runtime;

/// The kernel stages as start() built them, before any of them launches (pipeline::on_kernels_built).
class built_kernels {
public:
  /// The kernel of stage `stage`; refused (errc::invalid_pipeline, naming the pipeline) for a stage
  /// the pipeline does not have (listing its kernel stages), a host stage, or a kernel stage fused
  /// into its neighbour.
  virtual ring_kernel_base& kernel(const std::string& stage) const = 0;

protected:
  ~built_kernels() = default;
};

/// How a stage with several outgoing connections hands out its messages.
enum class fan_out {
  broadcast,   ///< every connection gets every message
  round_robin, ///< connections take turns, one message each
};

struct link_options {
  std::optional<link_kind> kind; ///< forced kind (direct needs ends that share memory)
  std::uint32_t capacity = 0;    ///< ring slots (a power of two); 0: the pipeline's default
};

/// What a pipeline's kernels and rings are tuned for.
enum class pipeline_objective {
  /// Chosen by the planner: latency while the threads busy under it (kernels on CPU devices,
  /// resident or batched, whose compute units are host threads; the runtime's threads running host
  /// stages; an application thread at inlets and outlets) fit the host's cores, else throughput.
  /// plan() says which it chose and why.
  automatic,
  /// Resident kernels over rings of `capacity` slots: a message crosses in about a microsecond.
  latency,
  /// Kernels that name no mode run batched (one launch per run of queued messages, nothing
  /// spinning between runs), and links get rings of about 1 MiB (up to 65,536 slots) unless a
  /// capacity is given: a stream over several devices whose kernels would otherwise spin on the same
  /// few host cores (PoCL's devices are host threads). See docs/performance.md.
  throughput,
};

constexpr std::string_view to_string(pipeline_objective o) noexcept {
  switch (o) {
  case pipeline_objective::automatic: return "automatic";
  case pipeline_objective::latency: return "latency";
  case pipeline_objective::throughput: return "throughput";
  }
  return "?";
}

struct pipeline_options {
  std::string name = "pipeline";
  /// Ring slots per link that names none (a power of two); 0: the objective's, 1,024 for latency
  /// asked for, about 1 MiB (up to 65,536 slots) for throughput and for automatic (whose
  /// resident kernels hand a backlog to batched launches, which need the room), twice that at a
  /// kernel on a CPU device without shared memory (its batches take half a ring); for messages
  /// over 4 KiB, fewer: at most about 4 MiB a ring, at least 4 slots.
  std::uint32_t capacity = 0;
  pipeline_objective objective = pipeline_objective::automatic; ///< plan() says what it chose
  /// Messages a staged link or host stage moves per turn; 0: the objective's, 256 for latency
  /// and up to 4,096 (at most about 1 MiB, at least 256) for throughput, where each turn's fixed
  /// cost (a poll, a wake, a function call) must vanish beside the messages it moves.
  std::uint32_t staging_batch = 0;
  /// Run adjacent map kernels (RINGPIPE_MAP_KERNEL) of one program on one device as one kernel,
  /// when nothing else reads between them and their link is not forced: one resident kernel and
  /// no ring instead of two kernels polling a ring. plan() and metrics() show fused links.
  bool fuse_kernels = true;
  /// How long stop() and the destructor wait for stages to leave before giving up on them. A
  /// kernel that has not returned by then (OpenCL cannot kill a launch) is reported and detached:
  /// its memory stays allocated while it runs, and is leaked if it never returns.
  std::chrono::milliseconds give_up_after{500};
  /// Places kernel stages that name no device; null: freest_device.
  std::shared_ptr<const placement_policy> placement = nullptr;
  /// Called with a snapshot every `metrics_every` from start() on, on a runtime thread (keep it
  /// short; it must not wait for the pipeline), and once more with the final one when wait()
  /// returns or throws the pipeline's failure, or stop() is called. One that throws is not called
  /// again (said through runtime_options::notice). Progress lines, dashboards, logs.
  std::function<void(const pipeline_metrics&)> on_metrics = nullptr;
  std::chrono::milliseconds metrics_every{1000};
};

/// A message type as the pipeline checks it at run time (connections by name).
struct message_type {
  std::type_index type = typeid(void);
  std::size_t size = 0;
  std::string name;
  template <class T> static message_type of();
  bool none() const noexcept { return size == 0; }
};

template <class T> struct input_port { std::size_t stage; };
template <class T> struct output_port { std::size_t stage; };

/// A declared stage; its ports are what connect() takes.
template <class In, class Out> struct stage_ref {
  std::size_t id;
  std::size_t out_id = static_cast<std::size_t>(-1); ///< where output leaves when not `id` (a farm's merger)
  input_port<In> in() const requires(!std::is_same_v<In, no_message>) { return {id}; }
  output_port<Out> out() const requires(!std::is_same_v<Out, no_message>) {
    return {out_id == static_cast<std::size_t>(-1) ? id : out_id};
  }
};

namespace detail {
struct pipeline_impl;
struct stage_decl;
} // namespace detail

class pipeline {
public:
  explicit pipeline(runtime& rt, pipeline_options options = {});
  /// Stops every kernel and actor at once if still running. Never throws.
  ~pipeline();
  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  // --- declaring stages (names are unique; errors name them) ---
  // Host functions (sources, host stages, sinks) run on the runtime's threads: one stage's
  // function is called by one thread at a time, in message order; functions of different stages
  // may run at once, so state they share needs a lock or an atomic, or take turns on one thread
  // (a farm whose CPU replicas fill the cores: plan() says so), where one that blocks for longer
  // than 10 ms has a parked thread run the other stages meanwhile. A source's or host function's
  // results leave at the end of its turn (up to pipeline_options::staging_batch messages): one
  // that waits for outside input holds what it made until then; an inlet is for that.
  /// A host generator: `gen()` returns the next message, or std::nullopt to end the stream.
  template <class T, class Gen> stage_ref<no_message, T> add_source(std::string name, Gen gen);
  /// A host function per message: `fn(in)` returns Out, or std::optional<Out> (nullopt drops it).
  template <class In, class Out, class Fn> stage_ref<In, Out> add_host(std::string name, Fn fn);
  /// A ring kernel (no_message for a side without a ring: kernel sources and sinks).
  template <class In, class Out>
  stage_ref<In, Out> add_kernel(std::string name, kernel_spec spec, placement where = {}, kernel_options options = {});
  /// A farm (farm.hpp): the kernel `spec` replicated on several devices, fed from per-replica
  /// queues with work stealing, results merged (in order unless told otherwise). Its stages are
  /// "name:deal", "name@0".. (one kernel per device) and "name:merge"; connect to it
  /// through the returned ref, or by name to "name:deal.in" and from "name:merge.out".
  template <class In, class Out>
  stage_ref<In, Out> add_farm(std::string name, kernel_spec spec, farm_options farm = {}, kernel_options options = {});
  /// A host function consuming every message.
  template <class In, class Fn> stage_ref<In, no_message> add_sink(std::string name, Fn fn);
  // The same per batch: spans of up to pipeline_options::staging_batch messages, in order (shorter
  // where a ring wraps). The spans are the rings' own slots, valid only during the call. A batch
  // function that throws loses its whole batch (stop_report::lost_in counts it).
  /// `gen(std::span<T> room)` fills the first k messages of `room` and returns k (0: nothing
  /// yet), or std::nullopt to end the stream.
  template <class T, class Gen> stage_ref<no_message, T> add_source_batch(std::string name, Gen gen);
  /// `fn(std::span<const In> in, std::span<Out> out)` writes k <= in.size() results to the
  /// front of `out` and returns k.
  template <class In, class Out, class Fn> stage_ref<In, Out> add_host_batch(std::string name, Fn fn);
  /// `fn(std::span<const In> in)` consumes a batch.
  template <class In, class Fn> stage_ref<In, no_message> add_sink_batch(std::string name, Fn fn);
  /// A ring the application pushes into after start() (inlet<T>(name)), closing it to end.
  template <class T> stage_ref<no_message, T> add_inlet(std::string name);
  /// A ring the application pops from after start() (outlet<T>(name)).
  template <class T> stage_ref<T, no_message> add_outlet(std::string name);

  // --- connecting ---
  template <class T> void connect(output_port<T> from, input_port<T> to, link_options options = {}) {
    connect_ids(from.stage, to.stage, options);
  }
  /// By name ("stage", "stage.out" -> "stage", "stage.in"), checked at run time: a message type
  /// mismatch is refused naming both ports.
  void connect(const std::string& from, const std::string& to, link_options options = {});
  void set_fan_out(const std::string& stage, fan_out policy);
  template <class In, class Out> void set_fan_out(stage_ref<In, Out> stage, fan_out policy) {
    set_fan_out_id(stage.id, policy);
  }

  // --- one pipeline over several processes (cross_rank.hpp) ---
  /// Runs `stage` (a farm: all of its stages) on process `rank` of a program whose every process
  /// declares this pipeline alike; `any_rank`: chosen once the ranks are known (cross_rank.hpp).
  /// Stages not placed run on rank 0.
  void on_rank(const std::string& stage, int rank);
  template <class In, class Out> void on_rank(stage_ref<In, Out> stage, int rank) { on_rank_id(stage.id, rank); }
  /// How much work kernel stage `stage` is beside the others (default 1; a farm by its name: the
  /// farm's, shared among its replicas, one each by default), for sharing the stages on any_rank
  /// out over the ranks: each rank gets a run of the stream whose cost matches its weight.
  void set_cost(const std::string& stage, double cost);
  /// This process is rank `rank` of `ranks`: start() runs only the stages placed on it, with a
  /// port for each connection to another rank. Called by the code that joins the processes.
  /// `weights` (per rank, the same on every rank; empty: equal) share out the stages on any_rank.
  void set_ranks(int rank, int ranks, std::vector<double> weights = {});
  /// Whether a stage is placed on any_rank.
  bool has_any_rank() const;
  /// The rank `stage` (a farm: by its name) runs on: as placed, or as chosen for any_rank once
  /// set_ranks() was called.
  int rank_of(const std::string& stage) const;
  /// This rank's ends of the connections between ranks, rings included after start(); empty
  /// until set_ranks(). Refuses what start() would refuse (a stage on no rank of the program).
  std::vector<cross_rank_link> cross_rank_links() const;

  // --- running ---
  /// Validates the graph and plans it (placement, fusion, link kinds, persistent budget) without
  /// building or launching anything and without any OpenCL call: what start() will build.
  /// Throws what start() would throw for an invalid graph.
  pipeline_plan dry_run() const;
  /// Validates (cycles, message types and sizes, unconnected ports, persistent budget), builds
  /// and places kernels, creates rings and links, then launches. Throws before launching anything
  /// if the pipeline is invalid.
  void start();
  /// Returns when every sink and outlet has seen the end of the stream and every kernel has
  /// stopped; throws the first failure, naming its stage, after stopping everything; throws
  /// errc::cancelled once stop() was called (by any thread, a host function of this pipeline
  /// too), when the stages have left; throws errc::timeout naming the stages that have not
  /// finished. A host function of another pipeline may wait too: while it does, another io thread
  /// runs (runtime::stand_in_thread).
  void wait(std::chrono::nanoseconds timeout = std::chrono::minutes(10));
  void run(std::chrono::nanoseconds timeout = std::chrono::minutes(10)) {
    start();
    wait(timeout);
  }
  /// Stops everything at once and reports what was left undelivered: every message pushed before
  /// the stop was either delivered or is counted here, by the ring it waits in. Also after a
  /// failure. Never throws. Any thread; a thread in wait() is released with errc::cancelled. A
  /// host function of this pipeline may call it too (a sink that has seen enough): its stage is
  /// not called again and leaves when the function returns; the report counts the messages
  /// given to that function as delivered, and what it returns from that call is not passed on;
  /// if it then throws, wait() throws the stop and says the failure after it, and a later stop()
  /// reports the message it threw on as lost.
  /// The other stages leave on the runtime's other threads; where it has no other (one io
  /// thread, or the others parked or held), one stands in while the function waits
  /// (runtime::stand_in_thread).
  stop_report stop() noexcept;
  /// The first failure, if any.
  std::exception_ptr failure() const;

  template <class T> ring<T> inlet(const std::string& name) {
    return ring<T>(port_ring(name, message_type::of<T>(), true));
  }
  template <class T> ring<T> outlet(const std::string& name) {
    return ring<T>(port_ring(name, message_type::of<T>(), false));
  }

  /// A snapshot of every stage's and link's counts (empty before start()). Any thread may ask,
  /// a host function of this pipeline too, from its first call; so may it ask for plan().
  pipeline_metrics metrics() const;

  // --- for the layers above (coordination: barriers over stages) ---
  /// Runs `fn` in start() once every kernel is built and before any launches, with the kernels by
  /// stage name: it may bind their arguments (a barrier's seats). What it throws fails start(),
  /// naming the pipeline, with nothing launched.
  void on_kernels_built(std::function<void(const built_kernels&)> fn);
  /// Kernel stage `stage` runs persistent where its device can (unless its options name a mode):
  /// a barrier's kernels wait on their devices, so they must stay resident.
  void keep_resident(std::string stage);
  /// metrics().barriers gets what `stats` returns, once per call of metrics() after start().
  void add_barrier_metrics(std::function<barrier_stats()> stats);

  /// One line per stage and link: where it runs and how it is connected (after start()).
  std::string plan() const;
  /// The pipeline as a Graphviz graph (`dot -Tsvg`): stages grouped by the host and each device
  /// (inside a box for this rank when split over ranks), kernels with their mode, links with their
  /// kind and ring size and, once started, the messages and bytes they carried.
  std::string dot() const;
  /// dot()'s clusters and edges alone, every node id prefixed with `prefix` (distinct per part):
  /// distributed_pipeline::dot() joins the ranks' parts into one graph.
  std::string dot_part(const std::string& prefix) const;
  /// dot()'s opening: `digraph "graph" {` with `title` (and the legend of link styles) as label.
  static std::string dot_header(const std::string& graph, std::string title);
  runtime& rt() noexcept;
  const std::string& name() const noexcept;

private:
  std::size_t add_stage(std::string name, stage_kind kind, message_type in, message_type out);
  detail::stage_decl& def(std::size_t id);
  void set_generate(std::size_t id, detail::generate_run fn);
  void set_transform(std::size_t id, detail::transform_run fn);
  void set_consume(std::size_t id, detail::consume_run fn);
  void set_kernel(std::size_t id, kernel_spec spec, placement where, kernel_options options);
  /// Declares a farm's stages and connections; returns its dealer's and its merger's ids.
  std::pair<std::size_t, std::size_t> add_farm_stages(const std::string& name, const message_type& in,
                                                      const message_type& out, const kernel_spec& spec,
                                                      farm_options farm, kernel_options options);
  void connect_ids(std::size_t from, std::size_t to, link_options options);
  void set_fan_out_id(std::size_t stage, fan_out policy);
  void on_rank_id(std::size_t stage, int rank);
  std::shared_ptr<ring_buffer> port_ring(const std::string& name, const message_type& type, bool inlet);

  std::unique_ptr<detail::pipeline_impl> impl_;
};

// ---- implementation of the templates ----

namespace detail {
std::string demangle(const char* name);
}

template <class T> message_type message_type::of() {
  if constexpr (std::is_same_v<T, no_message>) {
    return {typeid(no_message), 0, "no_message"};
  } else {
    static_assert(std::is_trivially_copyable_v<T>, "pipeline messages are copied as bytes");
    return {typeid(T), sizeof(T), detail::demangle(typeid(T).name())};
  }
}

// The parameters below are moved into the pipeline; clang-tidy 14 does not see moves in
// function templates and asks for const references.
// NOLINTBEGIN(performance-unnecessary-value-param)
template <class T, class Gen> stage_ref<no_message, T> pipeline::add_source(std::string name, Gen gen) {
  const auto id = add_stage(std::move(name), stage_kind::source, message_type::of<no_message>(), message_type::of<T>());
  set_generate(id, detail::per_message_source<T>(std::move(gen)));
  return {id};
}

template <class T, class Gen> stage_ref<no_message, T> pipeline::add_source_batch(std::string name, Gen gen) {
  const auto id = add_stage(std::move(name), stage_kind::source, message_type::of<no_message>(), message_type::of<T>());
  set_generate(id, detail::batch_source<T>(std::move(gen)));
  return {id};
}

template <class In, class Out, class Fn> stage_ref<In, Out> pipeline::add_host(std::string name, Fn fn) {
  const auto id = add_stage(std::move(name), stage_kind::host, message_type::of<In>(), message_type::of<Out>());
  set_transform(id, detail::per_message_transform<In, Out>(std::move(fn)));
  return {id};
}

template <class In, class Out, class Fn> stage_ref<In, Out> pipeline::add_host_batch(std::string name, Fn fn) {
  const auto id = add_stage(std::move(name), stage_kind::host, message_type::of<In>(), message_type::of<Out>());
  set_transform(id, detail::batch_transform<In, Out>(std::move(fn)));
  return {id};
}

template <class In, class Out>
stage_ref<In, Out> pipeline::add_kernel(std::string name, kernel_spec spec, placement where, kernel_options options) {
  const auto id = add_stage(std::move(name), stage_kind::kernel, message_type::of<In>(), message_type::of<Out>());
  set_kernel(id, std::move(spec), where, options);
  return {id};
}

template <class In, class Out>
stage_ref<In, Out> pipeline::add_farm(std::string name, kernel_spec spec, farm_options farm, kernel_options options) {
  static_assert(!std::is_same_v<In, no_message> && !std::is_same_v<Out, no_message>,
                "a farm takes items and returns results");
  const auto [deal, merge] =
      add_farm_stages(name, message_type::of<In>(), message_type::of<Out>(), spec, std::move(farm), options);
  return {deal, merge};
}

template <class In, class Fn> stage_ref<In, no_message> pipeline::add_sink(std::string name, Fn fn) {
  const auto id = add_stage(std::move(name), stage_kind::sink, message_type::of<In>(), message_type::of<no_message>());
  set_consume(id, detail::per_message_sink<In>(std::move(fn)));
  return {id};
}

template <class In, class Fn> stage_ref<In, no_message> pipeline::add_sink_batch(std::string name, Fn fn) {
  const auto id = add_stage(std::move(name), stage_kind::sink, message_type::of<In>(), message_type::of<no_message>());
  set_consume(id, detail::batch_sink<In>(std::move(fn)));
  return {id};
}

template <class T> stage_ref<no_message, T> pipeline::add_inlet(std::string name) {
  return {add_stage(std::move(name), stage_kind::inlet, message_type::of<no_message>(), message_type::of<T>())};
}

template <class T> stage_ref<T, no_message> pipeline::add_outlet(std::string name) {
  return {add_stage(std::move(name), stage_kind::outlet, message_type::of<T>(), message_type::of<no_message>())};
}

// NOLINTEND(performance-unnecessary-value-param)

} // namespace ringpipe
