#pragma once
// A barrier over a pipeline's stages: ring kernel stages by name, each with the argument its
// seat is bound to, and host participants by name (application threads, host code). It is built
// in start(), after the kernels and before any launches (so a barrier that could never complete is
// refused with nothing running), fails with its kernels as any barrier does, and its counters
// appear in the pipeline's metrics (table and JSON).
//
//   auto phases = add_barrier(p, {barrier_member::stage("left", 1), barrier_member::stage("right", 1),
//                                 "driver"}, {.name = "phases", .on_phase = swap_edges});
//   p.start();
//   for (...) phases->arrive_and_wait(phases->participant("driver"));

#include <ringpipe/barrier.hpp>
#include <ringpipe/pipeline.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ringpipe {

/// One member of a pipeline barrier.
struct barrier_member {
  barrier_member(const char* host) : name(host) {}            // NOLINT(google-explicit-constructor)
  barrier_member(std::string host) : name(std::move(host)) {} // NOLINT(google-explicit-constructor)
  /// Kernel stage `stage`, whose kernel takes its seat (`__global rp_barrier_seat*`) as its own
  /// argument `seat_arg` (counted after RINGPIPE_KERNEL_PARAMS, like kernel_spec::args, which
  /// must not cover it). On a device without shared memory the kernel arrives through the host
  /// instead (rp_barrier_relay) and takes no seat.
  static barrier_member stage(std::string stage, unsigned seat_arg) {
    barrier_member m(std::move(stage));
    m.seat_arg = seat_arg;
    return m;
  }
  std::string name;
  std::optional<unsigned> seat_arg; ///< set: a kernel stage
};

/// What add_barrier returns: the barrier once the pipeline started.
class pipeline_barrier {
public:
  struct slot;
  explicit pipeline_barrier(std::shared_ptr<slot> s) : slot_(std::move(s)) {}
  /// Refused (errc::invalid_pipeline) before the pipeline's start() built it.
  barrier& get() const;
  barrier* operator->() const { return &get(); }

private:
  std::shared_ptr<slot> slot_;
};

/// How add_barrier builds its barrier in start(): which members take part in this process, and
/// the barrier that joins them. Empty: every member, a ringpipe::barrier. The MPI component's
/// mpi::add_barrier takes the members on this rank and joins them to the other ranks' with an
/// mpi::rank_barrier (the returned pointer may share ownership with what holds the barrier).
struct barrier_builder {
  std::function<bool(const barrier_member&)> takes_part = nullptr;
  std::function<std::shared_ptr<barrier>(std::vector<barrier_participant>, barrier_options)> build = nullptr;
};

/// Declares a barrier over `members` of `p` (before p.start()). Stage names are checked in
/// start(): an unknown stage, a host stage given as a kernel, or a fused one is refused there,
/// naming the pipeline, the barrier and the stage.
pipeline_barrier add_barrier(pipeline& p, std::vector<barrier_member> members, barrier_options options = {},
                             barrier_builder builder = {});

} // namespace ringpipe
