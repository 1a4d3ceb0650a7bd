#pragma once
// Links: how messages travel between two stages. One function, choose_link(), decides the kind
// for a pair of ends; the topology (and so ringpipe-info) and the pipeline planner both call it,
// so what ringpipe-info prints for two devices is what a pipeline between them builds.
//
// Kinds and where they are built:
//   direct  one ring both ends poll (src/pipeline/runner.cpp makes it in the consumer's SVM)
//   staged  a host copy: kernels without shared memory copy batches through pinned memory
//           (src/kernel/mirror_driver.cpp); two devices that cannot share a ring get a ring
//           each and a mover between them (src/actor/stages.hpp)
//   fused   no ring: two map kernels run as one (decided by the planner)
// A link between processes (MPI) will be one more kind, `remote`, chosen where an end is a rank.

#include <ringpipe/device.hpp>

#include <optional>
#include <string_view>

namespace ringpipe {

enum class link_kind {
  direct, ///< both ends reach the same ring memory (the host, or fine-grained SVM of one context)
  staged, ///< a host copy through pinned host memory
  fused,  ///< pipelines only: both stages run in one kernel, no ring between them
};
std::string_view to_string(link_kind k) noexcept;

/// One end of a link: the host (a host stage or the application), or a kernel on a device.
struct link_end {
  const device* dev = nullptr; ///< null: the host
  static link_end host() noexcept { return {}; }
  static link_end on(const device& d) noexcept { return {&d}; }
};

/// Whether a kernel on `d` can poll rings that the host (and other devices of its context) also
/// poll: fine-grained buffer SVM with SVM atomics.
bool reaches_shared_memory(const device& d) noexcept;

/// The kind of link between two ends: direct when one ring can serve both without a copy (the
/// host with itself; a device with the host or with a device of its own context, when every
/// device end reaches shared memory); staged otherwise.
link_kind choose_link(link_end from, link_end to) noexcept;
inline link_kind choose_link(const device& from, const device& to) noexcept {
  return choose_link(link_end::on(from), link_end::on(to));
}

/// How bytes move from one end's memory to the other's (device arrays, peer copies). Derived from
/// choose_link(), so an array copy between two devices takes the path a pipeline link between them
/// would:
enum class copy_path {
  shared, ///< a direct link: one memcpy through memory both ends reach (fine-grained SVM, the host)
  device, ///< the OpenCL implementation copies once: read/write/copy buffer (one end is the host,
          ///< or both share a context without shared memory)
  staged, ///< devices of different contexts: two copies through pinned host memory, in chunks
};
std::string_view to_string(copy_path p) noexcept;
copy_path choose_copy(link_end from, link_end to) noexcept;

/// Whether a kernel on `a` reads and writes memory allocated on `b` (a device array) directly,
/// with no copy: the same device, or a direct link between them.
bool can_access(const device& a, const device& b) noexcept;

} // namespace ringpipe
