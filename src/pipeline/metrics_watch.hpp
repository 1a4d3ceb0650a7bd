#pragma once
// The periodic metrics callback (pipeline_options::on_metrics): a timer on the runtime's executor
// takes a snapshot every interval while the pipeline runs (no thread of its own), and finish()
// makes one last call with the final snapshot.

#include <ringpipe/metrics.hpp>
#include <ringpipe/runtime.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace ringpipe::detail {

class metrics_watch {
public:
  using take_fn = std::function<pipeline_metrics()>;
  using call_fn = std::function<void(const pipeline_metrics&)>;
  /// `name`: the pipeline's, for the notice when the callback throws (no more calls then).
  metrics_watch(runtime& rt, std::string name, std::chrono::milliseconds every, take_fn take, call_fn call);
  /// Cancels the timer and waits for a call in progress; no last call.
  ~metrics_watch();
  metrics_watch(const metrics_watch&) = delete;
  metrics_watch& operator=(const metrics_watch&) = delete;
  /// Once: the timer cancelled, a call in progress waited for, then the last call. From within the
  /// callback (it stopped the pipeline), only the timer is cancelled.
  void finish() noexcept;

private:
  struct state;
  std::shared_ptr<state> s_;
};

} // namespace ringpipe::detail
