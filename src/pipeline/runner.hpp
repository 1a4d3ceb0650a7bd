#pragma once
// The runner: builds what a plan describes (kernels, rings, host stages, movers), launches it,
// waits for it, stops it, and reports on it (metrics, plan text, stop report).

#include "../actor/host_stage.hpp"
#include "planner.hpp"

#include <ringpipe/runtime.hpp>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace ringpipe::detail {

struct stage_run {
  std::unique_ptr<ring_kernel_base> kernel;
  std::shared_ptr<ring_buffer> kernel_in, kernel_out;
  std::shared_ptr<host_stage> actor;
  std::shared_ptr<ring_buffer> port; // inlets and outlets
  bool given_up = false;             // a kernel that did not return in time: detached
};

struct link_run {
  std::shared_ptr<ring_buffer> producer_ring; // where the producer side pushes
  std::shared_ptr<ring_buffer> consumer_ring; // where the consumer side pops (same ring unless a mover)
  std::shared_ptr<host_stage> mover;          // copies producer_ring -> consumer_ring
  std::function<std::uint64_t()> delivered;   // messages the consumer side has taken
};

/// Wakes kernel `k` when new input reaches it (a resident kernel polls on its own; null: nobody).
inline std::function<void()> kernel_waker(ring_kernel_base* k) {
  return [k] {
    if (k != nullptr && k->mode() != kernel_mode::persistent) k->notify();
  };
}

/// What stages and kernels call back into. It outlives the runner when a stage or a detached
/// kernel it gave up on still runs: the runner disconnects it on destruction.
struct runner_events {
  std::mutex mutex;
  class runner* target = nullptr;
  template <class Fn> void with(Fn&& fn) {
    std::lock_guard lock(mutex);
    if (target != nullptr) fn(*target);
  }
};

class runner {
public:
  runner(runtime& rt, const graph& g, plan p, const pipeline_options& options);
  ~runner();

  /// Builds the kernels (build and size errors, naming the stage), then rings, stages and
  /// movers, then launches the kernels; on an error nothing is left running. No host function
  /// runs before start_host_stages().
  void start();
  /// Lets the host stages run: from their first call they may ask the pipeline for its metrics
  /// and plan, so the pipeline holds this runner before it calls this.
  void start_host_stages();
  /// Returns when every stage finished; throws the first failure, or errc::cancelled after
  /// stop(), once the stages have left; errc::timeout naming those still running.
  void wait(std::chrono::nanoseconds timeout);
  /// Any thread, a host function of this pipeline too (its stage is not waited for).
  stop_report stop() noexcept;
  std::exception_ptr failure() const;
  std::shared_ptr<ring_buffer> port(std::size_t stage) const { return stages_[stage].port; }
  /// Wakes the stage beside inlet or outlet `stage` (the one that takes from the inlet's ring, or
  /// feeds the outlet's), for whoever fills or drains the port without the application's polling
  /// (a remote link); null where nothing there sleeps.
  std::function<void()> port_waker(std::size_t stage) const;

  pipeline_metrics metrics() const;
  std::string plan_text() const;

private:
  void build_kernels();
  void bind_kernels(); // the layers above, then every kernel's arguments checked
  void realize_links();
  void realize_stages();
  void count_deliveries();
  void wire_publish_wakes();
  /// Wakes stage `other` at the far end of connection `ei`: the connection's mover if it has one,
  /// else the host stage or (not resident) kernel there; null for an inlet or outlet.
  std::function<void()> waker_across(std::size_t ei, std::size_t other) const;
  /// What a kernel's publish calls for its neighbour `other` across edge `ei` (its input's producer
  /// where `feeds_kernel`, else its output's consumer): host_stage::kernel_published for the
  /// ring at the kernel, else waker_across.
  std::function<void()> publish_waker(std::size_t ei, std::size_t other, bool feeds_kernel) const;
  std::shared_ptr<host_stage> add_actor(std::shared_ptr<host_stage> a);
  /// A farm's dealer or merger (farm_actors.cpp), taking `batch` messages a turn.
  std::shared_ptr<host_stage> farm_actor(const stage_decl& s, std::uint32_t batch) const;

  void record_failure(const std::string& stage, const std::exception_ptr& e);
  void notify() noexcept;
  /// Stops every stage and kernel at once and cancels every ring with `reason`, waking whoever
  /// waits on one (application threads included); returns without waiting.
  void halt(const std::string& reason) noexcept;
  void cancel_rings(const std::string& reason) noexcept;
  /// Waits, until `deadline` at most, for stages to leave and kernels' launches to return;
  /// reports and detaches those that do not.
  void join(std::chrono::steady_clock::time_point deadline);
  bool finished(std::size_t stage) const;
  std::string why_running(std::size_t stage) const;
  std::string stage_label(std::size_t stage) const;

  runtime& rt_;
  const graph& g_;
  plan plan_;
  const pipeline_options& options_;
  std::vector<stage_run> stages_;
  std::vector<link_run> links_;
  std::vector<std::shared_ptr<host_stage>> actors_; // every host stage, movers included
  std::chrono::steady_clock::time_point start_time_;

  std::shared_ptr<runner_events> events_ = std::make_shared<runner_events>();
  mutable std::mutex mutex_;
  std::condition_variable changed_; // a stage finished, left or failed
  std::exception_ptr first_failure_;
  std::exception_ptr stopped_; // stop() was called: what wait() throws (errc::cancelled)
  /// The first failure came after the stop: wait() throws the stop, and says the failure where
  /// the stop did not cause it (a host function that stopped its pipeline and then threw, not
  /// one whose pop the stop cancelled): "stage 's' failed: ...".
  bool failure_after_stop_ = false;
  std::string failed_after_stop_;
  /// What wait() throws once the stages have left: the first of a failure and a stop (under mutex_).
  std::exception_ptr ended_by() const;
  /// The stop's report (report.cpp): what the rings and stages hold, `in_turn`'s run (a stage
  /// whose function called stop()) counted as `run` says it will be left.
  stop_report undelivered(const host_stage* in_turn, const host_stage::run_at_stop& run) const;
};

} // namespace ringpipe::detail
