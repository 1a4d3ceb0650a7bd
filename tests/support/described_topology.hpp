#pragma once
// Topologies a test describes instead of discovering: devices with the capabilities of PoCL's CPU
// devices (one context, fine-grained SVM, a shared worker pool), of rusticl (no SVM) or of a GPU,
// with no OpenCL object behind them. Planning needs nothing more, so planner tests run on a
// machine with no OpenCL platform at all.

#include <ringpipe/device.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/topology.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ringpipe::testing {

struct described_device {
  std::string platform;
  std::string name;
  bool shared_memory = false; ///< fine-grained buffer SVM with SVM atomics
  std::uint32_t budget = 0;   ///< persistent workers of its pool
  std::string pool;           ///< devices of one pool share workers (PoCL)
  device_type type = device_type::cpu;
  std::uint32_t workers = 2; ///< CPU devices: host threads its work-items run on (device_info::worker_threads)
};

inline described_device pocl_cpu(std::string name = "cpu") {
  return {"Portable Computing Language", std::move(name), true, 2, "pocl", device_type::cpu};
}
inline described_device rusticl_cpu() { return {"rusticl", "llvmpipe", false, 0, "", device_type::cpu}; }
inline described_device gpu_without_svm() { return {"NVIDIA CUDA", "H100", false, 0, "", device_type::gpu}; }

/// Devices of one platform share a context (as discovery gives them); their pools by name.
inline topology describe(const std::vector<described_device>& list) {
  std::map<std::string, std::shared_ptr<platform_context>> contexts;
  std::map<std::string, std::shared_ptr<occupancy>> pools;
  std::vector<device> devices;
  for (const auto& d : list) {
    device_info info;
    info.platform = d.platform;
    info.name = d.name;
    info.type = d.type;
    info.svm.fine_buffer = info.svm.atomics = info.c11_atomics = d.shared_memory;
    info.svm.coarse = true;
    info.modes = d.shared_memory ? std::vector{kernel_mode::persistent, kernel_mode::parked, kernel_mode::batched}
                                 : std::vector{kernel_mode::batched};
    info.persistent_budget = d.budget;
    info.worker_threads = d.type == device_type::cpu ? d.workers : 0;
    info.budget_pool = d.pool.empty() ? "#" + std::to_string(devices.size()) + " " + d.name : d.pool;
    auto& ctx = contexts[d.platform];
    if (!ctx) ctx = std::make_shared<platform_context>();
    auto& pool = pools[info.budget_pool];
    if (!pool) pool = std::make_shared<occupancy>(info.budget_pool, d.budget);
    const auto index = devices.size();
    devices.emplace_back(cl::Device(), std::move(info), index, ctx, pool);
  }
  return topology::from_devices(std::move(devices));
}

} // namespace ringpipe::testing
