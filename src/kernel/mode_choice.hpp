#pragma once
// How a ring kernel runs, chosen from facts alone (no OpenCL call): the transport its rings allow
// and the mode its device, budget and options allow. A table test covers every case.

#include <ringpipe/mode.hpp>

#include <optional>
#include <string>

namespace ringpipe::detail {

/// Where the kernel's driver moves messages.
enum class kernel_transport {
  shared_memory, ///< both rings in this device's fine-grained SVM: the kernel polls them itself
  mirrored,      ///< rings in host memory: batches copied through device mirrors
};

struct mode_facts {
  bool device_shares_memory = false; ///< fine-grained buffer SVM with SVM atomics
  bool rings_in_device_svm = false;  ///< every ring the kernel uses is in this device's SVM context
  bool supports_persistent = false;  ///< device_info::supports(persistent)
  bool supports_parked = false;
  bool persistent_available = false; ///< the budget leaves a worker for others after this one
  std::optional<kernel_mode> forced;
  bool gated = false; ///< a launch_gate holds its launches (a barrier's, through the host): one per phase
};

enum class mode_refusal {
  none,
  device_cannot,    ///< the device lacks what the forced mode needs
  rings_not_shared, ///< the forced mode needs the rings in the device's SVM
};

struct mode_choice {
  kernel_transport transport = kernel_transport::mirrored;
  kernel_mode mode = kernel_mode::batched;
  mode_refusal refusal = mode_refusal::none;
};

mode_choice choose_mode(const mode_facts& facts) noexcept;

/// Batches a mirrored map kernel keeps in flight: `asked` (kernel_options::staging_lanes) where
/// given, else 2 where copies overlap kernels (GPUs, accelerators), 1 on CPU devices, whose cores
/// do both. The mirror driver runs this many; the planner sizes rings for it.
constexpr unsigned staging_lanes(unsigned asked, bool cpu_device) noexcept {
  return asked != 0 ? asked : cpu_device ? 1 : 2;
}

} // namespace ringpipe::detail
