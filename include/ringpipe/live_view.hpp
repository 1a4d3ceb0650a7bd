#pragma once
// A live view of running pipelines for long runs (demos, benchmarks, soaks). On a terminal, a
// table redrawn in place: per link its rate now and on average, bytes per second and messages so
// far; per stage its state, rates and how full its input queue is (where backpressure builds up).
// Elsewhere (a pipe, a log, CI), a plain line per link each interval. It renders the snapshots
// pipeline_options::on_metrics delivers; attach() sets that callback and its interval.
//
//   live_view view({.title = "demo"});
//   pipeline_options options{.name = "demo"};
//   view.attach(options);
//   pipeline p(rt, options);
//   ...
//   p.run(); // the last table stays on screen (keep = false erases it at end())
//
// One view can follow pipelines run one after another (a soak): each redraws the same table.

#include <ringpipe/metrics.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace ringpipe {

struct pipeline_options;

enum class live_look {
  automatic, ///< a table when the output is a terminal, lines otherwise
  table,     ///< redrawn in place with terminal escape codes
  lines,     ///< plain lines, one per link per interval
};

struct live_view_options {
  std::string title = "pipeline"; ///< the table's first word, and each line's
  std::FILE* out = stdout;
  live_look look = live_look::automatic;
  /// How often the view is drawn: 0 gives 250 ms for the table, 2 s for lines.
  std::chrono::milliseconds every{0};
  /// The last table stays on the screen after end(); false erases it (a benchmark prints its
  /// result in its place).
  bool keep = true;
  /// Called at each drawing, on the runtime's thread: a line shown under the table or, as it is,
  /// after the lines (a soak's totals, say). Empty: none.
  std::function<std::string()> footer = nullptr;
};

class live_view {
public:
  explicit live_view(live_view_options options = {});
  /// end().
  ~live_view();
  live_view(const live_view&) = delete;
  live_view& operator=(const live_view&) = delete;

  /// Sets options.on_metrics to this view and options.metrics_every to its interval. The view
  /// must outlive the pipelines it is attached to, or end() must be called before it goes.
  void attach(pipeline_options& options) const;
  /// Draws one snapshot now. Rates are over the time since the snapshot drawn before it (none
  /// when its elapsed time went back). The callback attach() sets also tells pipelines apart, and
  /// keeps a snapshot that comes within half an interval of the last drawing for the next one or
  /// for end(): short pipelines one after another are drawn once an interval, not once each.
  void show(const pipeline_metrics& m);
  /// Draws the snapshot kept back, if any (the last pipeline's final counts), or else the
  /// table's footer again (what it counts may have moved since), then stops drawing: later
  /// snapshots are ignored; the table is erased unless `keep`.
  void end() noexcept;
  /// Whether it draws a table (a terminal, or live_look::table).
  bool draws_table() const noexcept;
  /// The interval attach() sets.
  std::chrono::milliseconds every() const noexcept;

private:
  struct state;
  std::shared_ptr<state> s_;
};

} // namespace ringpipe
