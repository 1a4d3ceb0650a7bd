#pragma once
// What a pipeline will build: each stage's device and fusion, each connection's link kind. A
// value, made without any OpenCL call (pipeline::dry_run()), so placement and link choices can be
// checked, shown and tested on a machine that lacks the devices.

#include <ringpipe/link.hpp>
#include <ringpipe/metrics.hpp>
#include <ringpipe/mode.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ringpipe {

struct pipeline_plan {
  struct stage {
    std::string name;
    stage_kind kind = stage_kind::host;
    std::optional<std::size_t> device; ///< kernel stages: the device index
    std::string fused_into;            ///< runs inside that stage's kernel (empty: its own)
    std::vector<std::string> fused_with;
    std::optional<kernel_mode> mode; ///< kernel stages: the mode asked for (by the user or the objective)
    bool mode_from_objective = false;
    /// Parked by the objective and fed by host stages: leaves after a few empty polls.
    bool leaves_when_idle = false;
  };
  struct link {
    std::string from; ///< "stage.out"
    std::string to;   ///< "stage.in"
    link_kind kind = link_kind::direct;
    bool forced = false;
    bool mover = false;         ///< a host mover copies between a ring near each end
    std::uint32_t capacity = 0; ///< ring slots
  };
  std::string objective;        ///< "latency" or "throughput"
  std::string objective_reason; ///< "asked for", or why the planner chose it
  /// Why kernels whose mode the runtime chooses run parked rather than persistent (empty: none
  /// is kept from persistent).
  std::string parking_reason;
  /// The io threads the pipeline asks of the runtime while it runs (runtime::hold_threads): one
  /// per host stage (source, host function, sink, merge, split, mover) and one per kernel on a
  /// device without shared memory, whose proxy copies its batches. The runtime grows to them, up
  /// to runtime::thread_limit().
  std::size_t host_stage_threads = 0;
  std::size_t copying_proxy_threads = 0;
  /// Not empty: the pipeline asks for one io thread instead, and why (a farm whose kernels on CPU
  /// devices fill the host's cores; runtime::narrow_threads).
  std::string one_io_thread_reason;
  /// Not empty: while nothing comes, the pipeline's stages keep polling instead of sleeping until
  /// a push wakes them, and why (the kernel refuses the process-wide fence that needs).
  std::string idle_polling_reason;
  std::vector<stage> stages;
  std::vector<link> links;
  /// The devices the kernels run on, grouped so that devices of one group reach each other
  /// through direct links (shared memory) and links between groups are staged.
  std::vector<std::vector<std::size_t>> device_groups;
  /// Links whose messages are copied through host memory (staged).
  std::size_t staged_links() const noexcept;

  /// The link from port `from` to port `to`, or null.
  const link* find_link(const std::string& from, const std::string& to) const;
  /// The stage named `name`, or null.
  const stage* find_stage(const std::string& name) const;
  /// One line per stage and link.
  std::string text() const;
};

} // namespace ringpipe
