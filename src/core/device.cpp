#include <ringpipe/backoff.hpp>
#include <ringpipe/cpu_cores.hpp>
#include <ringpipe/device.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/program.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ringpipe {
namespace {

// From cl_ext.h's cl_nv_device_attribute_query; spelled out so the probe builds without it.
constexpr cl_device_info device_kernel_exec_timeout_nv = 0x4005;

bool has_extension(const std::string& extensions, std::string_view name) {
  std::size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string::npos) {
    const auto end = pos + name.size();
    const bool starts = pos == 0 || extensions[pos - 1] == ' ';
    const bool ends = end == extensions.size() || extensions[end] == ' ';
    if (starts && ends) return true;
    pos = end;
  }
  return false;
}

template <class T> T info_or(const cl::Device& d, cl_device_info what, T fallback) {
  T value{};
  return clGetDeviceInfo(d(), what, sizeof(T), &value, nullptr) == CL_SUCCESS ? value : fallback;
}

} // namespace

std::optional<kernel_mode> parse_kernel_mode(std::string_view text) noexcept {
  for (auto m : {kernel_mode::persistent, kernel_mode::parked, kernel_mode::batched})
    if (text == to_string(m)) return m;
  return std::nullopt;
}

std::string_view to_string(device_type t) noexcept {
  switch (t) {
  case device_type::cpu: return "cpu";
  case device_type::gpu: return "gpu";
  case device_type::accelerator: return "accelerator";
  case device_type::other: return "other";
  }
  return "other";
}

bool device_info::supports(kernel_mode m) const noexcept {
  return std::find(modes.begin(), modes.end(), m) != modes.end();
}

device_info probe_device(const cl::Platform& platform, const cl::Device& d) {
  device_info info;
  cl_call("clGetDeviceInfo", [&] {
    info.platform = platform.getInfo<CL_PLATFORM_NAME>();
    info.name = d.getInfo<CL_DEVICE_NAME>();
    info.vendor = d.getInfo<CL_DEVICE_VENDOR>();
    info.version = d.getInfo<CL_DEVICE_VERSION>();
    info.driver_version = d.getInfo<CL_DRIVER_VERSION>();
    const auto type = d.getInfo<CL_DEVICE_TYPE>();
    info.type = (type & CL_DEVICE_TYPE_GPU)           ? device_type::gpu
                : (type & CL_DEVICE_TYPE_CPU)         ? device_type::cpu
                : (type & CL_DEVICE_TYPE_ACCELERATOR) ? device_type::accelerator
                                                      : device_type::other;
    info.compute_units = d.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
    info.global_memory = d.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
    info.local_memory = d.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
    info.max_alloc = d.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
    info.max_work_group_size = d.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>();
  });
  // "OpenCL <major>.<minor> <vendor text>"
  if (std::sscanf(info.version.c_str(), "OpenCL %d.%d", &info.opencl_major, &info.opencl_minor) != 2) {
    info.opencl_major = 1;
    info.opencl_minor = 0;
  }
  const bool cl2 = info.opencl_major >= 2;
  if (cl2) {
    const auto svm = info_or<cl_device_svm_capabilities>(d, CL_DEVICE_SVM_CAPABILITIES, 0);
    info.svm.coarse = (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0;
    info.svm.fine_buffer = (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0;
    info.svm.fine_system = (svm & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM) != 0;
    info.svm.atomics = (svm & CL_DEVICE_SVM_ATOMICS) != 0;
  }
  const auto extensions = cl_call("clGetDeviceInfo", [&] { return d.getInfo<CL_DEVICE_EXTENSIONS>(); });
  info.atomics_64 = has_extension(extensions, "cl_khr_int64_base_atomics");
  if (info.opencl_major >= 3) {
    // OpenCL 3.0 made 2.0 atomics optional: ask for acquire/release at device scope.
    const auto caps = info_or<cl_device_atomic_capabilities>(d, CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES, 0);
    info.c11_atomics = (caps & CL_DEVICE_ATOMIC_ORDER_ACQ_REL) && (caps & CL_DEVICE_ATOMIC_SCOPE_DEVICE);
    info.cl_std = "-cl-std=CL3.0";
  } else if (cl2) {
    info.c11_atomics = true;
    info.cl_std = "-cl-std=CL2.0";
  } else {
    info.cl_std = "-cl-std=CL1.2";
  }
  info.loops_limited = info.name.find("llvmpipe") != std::string::npos;
  if (has_extension(extensions, "cl_nv_device_attribute_query")) {
    info.execution_timeout = info_or<cl_bool>(d, device_kernel_exec_timeout_nv, CL_FALSE) == CL_TRUE;
  }

  // Modes: a resident kernel polls rings the host also touches, which needs fine-grained SVM with
  // SVM atomics and acquire/release atomics in OpenCL C. Batched launches need nothing special.
  const bool resident = info.svm.fine_buffer && info.svm.atomics && info.c11_atomics;
  if (resident) info.modes = {kernel_mode::persistent, kernel_mode::parked};
  info.modes.push_back(kernel_mode::batched);

  // Budget: PoCL's CPU devices run work-groups on one pool of worker threads, one per compute
  // unit, shared by every PoCL CPU device in the process. Elsewhere assume one resident
  // work-group per compute unit (conservative: a GPU can hold more).
  const bool pocl_cpu =
      info.platform.find("Portable Computing Language") != std::string::npos && info.type == device_type::cpu;
  if (pocl_cpu) info.budget_pool = info.platform + "/cpu-workers"; // else: the device's own (topology)
  if (info.type == device_type::cpu) {
    info.worker_threads =
        info.name.find("llvmpipe") != std::string::npos
            ? llvmpipe_worker_threads(std::getenv("LP_NUM_THREADS"), static_cast<unsigned>(detail::affinity_cpus()))
            : info.compute_units;
  }
  info.persistent_budget = resident ? info.compute_units : 0;
  if (resident && info.type == device_type::cpu) {
    info.round_group = 8;
    info.round_claim = 64;
  }
  return info;
}

device::device(cl::Device dev, device_info info, std::size_t index, std::shared_ptr<platform_context> ctx,
               std::shared_ptr<occupancy> budget)
    : device_(std::move(dev)), info_(std::make_shared<const device_info>(std::move(info))), index_(index),
      context_(std::move(ctx)), budget_(std::move(budget)) {}

std::string device::label() const { return "#" + std::to_string(index_) + " " + info_->platform + ": " + info_->name; }

} // namespace ringpipe
