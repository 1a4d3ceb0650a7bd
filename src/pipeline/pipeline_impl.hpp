#pragma once
// What a pipeline handle holds: its declaration and, once started, its runner.

#include "metrics_watch.hpp"
#include "planner.hpp"
#include "ranks.hpp"
#include "runner.hpp"

#include <memory>
#include <mutex>

namespace ringpipe::detail {

struct pipeline_impl {
  pipeline_impl(runtime& r, pipeline_options o) : rt(r), options(std::move(o)) { g.name = options.name; }
  runtime& rt;
  pipeline_options options;
  graph g;
  int rank = 0, ranks = 0;              // set_ranks(); 0 ranks: the whole pipeline runs here
  std::vector<double> rank_weights;     // set_ranks(): per rank, for stages on any_rank
  thread_hold threads;                  // from start() on: the io threads its stages run on
  std::unique_ptr<rank_part> part;      // this rank's part, from start() on (when split over ranks)
  std::unique_ptr<runner> run;          // after start()
  std::unique_ptr<metrics_watch> watch; // after start(), with on_metrics; destroyed before `run`
  host_capacity host() const { return {rt.host_cores(), rt.thread_limit()}; }
  /// The run ended (wait() returned or threw, or stop()): the last metrics call, and the io
  /// threads let go. wait() and stop() may end it at once on two threads.
  void ended() noexcept {
    if (watch) watch->finish(); // once, whoever comes first (metrics_watch)
    std::lock_guard lock(ended_mutex);
    threads = {};
  }
  std::mutex ended_mutex; // guards `threads` once started
  /// The graph start() runs: this rank's part, or the whole.
  const graph& graph_run() const { return part ? part->local : g; }
};

} // namespace ringpipe::detail
