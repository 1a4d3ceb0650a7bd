#pragma once
// One OpenCL device: what the probe found it can do, and the handles to use it.

#include <ringpipe/error.hpp>
#include <ringpipe/mode.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ringpipe {

class program_cache;
class occupancy;

enum class device_type { cpu, gpu, accelerator, other };
std::string_view to_string(device_type t) noexcept;

struct svm_capabilities {
  bool coarse = false;      ///< coarse-grained buffer SVM (map/unmap to share)
  bool fine_buffer = false; ///< fine-grained buffer SVM: host and device see each other's writes
  bool fine_system = false; ///< any host allocation is shared
  bool atomics = false;     ///< SVM atomics: host and device atomics on the same words interoperate
};

/// What the capability probe found for one device.
struct device_info {
  std::string platform;
  std::string name;
  std::string vendor;
  std::string version; ///< CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ..."
  std::string driver_version;
  int opencl_major = 1;
  int opencl_minor = 2;
  device_type type = device_type::other;
  std::uint32_t compute_units = 0;
  /// CPU devices: the host threads their work-items run on (PoCL: one worker per compute unit, in
  /// a pool its CPU devices share, see budget_pool; Mesa's llvmpipe: llvmpipe_worker_threads in
  /// cpu_cores.hpp); 0 for other devices.
  std::uint32_t worker_threads = 0;
  std::uint64_t global_memory = 0;
  std::uint64_t local_memory = 0;
  std::uint64_t max_alloc = 0;
  std::size_t max_work_group_size = 0;
  svm_capabilities svm;
  bool atomics_64 = false;  ///< cl_khr_int64_base_atomics
  bool c11_atomics = false; ///< OpenCL C atomic_load/store_explicit with acquire/release
  /// Whether the driver ends a launch's loops after a fixed count (Mesa's llvmpipe: 65535 iterations
  /// per group of work-items it runs together): ring kernels then check every item's loops.
  bool loops_limited = false;
  /// Whether kernels are killed after a run-time limit (NVIDIA reports it); empty if unknown.
  std::optional<bool> execution_timeout;
  std::string cl_std; ///< the -cl-std option ring kernels are built with

  /// Derived: ring-kernel modes this device supports, best first.
  std::vector<kernel_mode> modes;
  /// Derived: how many persistent kernels can be resident at once. Shared by every device with
  /// the same budget_pool (PoCL's CPU devices share one worker-thread pool).
  std::uint32_t persistent_budget = 0;
  std::string budget_pool;
  /// Derived: the group a resident ring kernel's rounds run as by default (launches over a batch
  /// run 64), and the most messages a round claims where its group is smaller (0: the group
  /// size). CPU devices that keep kernels resident (PoCL) run each of a round's loops over the
  /// whole group, busy or not: 8 items claiming up to 64 messages answer one message 2-3x faster
  /// than 64 items, with as many messages a second. Elsewhere 64 and the group size (a GPU's items
  /// are lanes; see docs/architecture.md).
  std::uint32_t round_group = 64;
  std::uint32_t round_claim = 0;

  bool supports(kernel_mode m) const noexcept;
};

/// Shared state of one platform: one context for all its selected devices (so fine-grained SVM
/// is shared between them) and the program cache of that context.
struct platform_context {
  cl::Platform platform;
  cl::Context context;
  std::shared_ptr<program_cache> programs;
};

/// A device handle; cheap to copy.
class device {
public:
  device(cl::Device dev, device_info info, std::size_t index, std::shared_ptr<platform_context> ctx,
         std::shared_ptr<occupancy> budget);

  const device_info& info() const noexcept { return *info_; }
  const std::string& name() const noexcept { return info_->name; }
  /// Position in topology::devices().
  std::size_t index() const noexcept { return index_; }
  const cl::Device& cl_device() const noexcept { return device_; }
  const cl::Context& context() const noexcept { return context_->context; }
  program_cache& programs() const noexcept { return *context_->programs; }
  occupancy& budget() const noexcept { return *budget_; }
  /// Same platform context: the two devices can share SVM and buffers.
  bool shares_context_with(const device& other) const noexcept { return context_ == other.context_; }
  /// "rusticl: llvmpipe (LLVM 15.0.6, 256 bits) #2": how errors and tables name a device.
  std::string label() const;

private:
  cl::Device device_;
  std::shared_ptr<const device_info> info_;
  std::size_t index_;
  std::shared_ptr<platform_context> context_;
  std::shared_ptr<occupancy> budget_;
};

/// Probes one device (no context needed). budget_pool and persistent_budget are filled in too.
device_info probe_device(const cl::Platform& platform, const cl::Device& dev);

} // namespace ringpipe
