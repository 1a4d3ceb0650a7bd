#include <ringpipe/occupancy.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/topology.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

namespace ringpipe {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<cl::Platform> all_platforms() {
  cl_uint count = 0;
  const cl_int status = clGetPlatformIDs(0, nullptr, &count);
  if (status == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (status == CL_SUCCESS && count == 0)) {
    throw error(errc::no_platform, "no OpenCL platform found: install pocl-opencl-icd (or check OCL_ICD_VENDORS)");
  }
  if (status != CL_SUCCESS) throw_opencl_error(status, "clGetPlatformIDs");
  std::vector<cl_platform_id> ids(count);
  if (const cl_int s = clGetPlatformIDs(count, ids.data(), nullptr); s != CL_SUCCESS)
    throw_opencl_error(s, "clGetPlatformIDs");
  std::vector<cl::Platform> platforms;
  platforms.reserve(ids.size());
  for (auto id : ids)
    platforms.emplace_back(id, true);
  return platforms;
}

} // namespace

std::string discovery_options::default_filter() {
  const char* env = std::getenv("RINGPIPE_DEVICE_FILTER");
  return env ? env : "";
}

topology topology::discover(const discovery_options& options) {
  topology topo;
  const auto filter = lower(options.device_filter);
  std::vector<std::string> seen; // every device found, for the "filter matched none" message
  std::map<std::string, std::shared_ptr<occupancy>> pools;

  for (const auto& platform : all_platforms()) {
    std::string platform_name = "(unnamed platform)";
    try {
      platform_name = platform.getInfo<CL_PLATFORM_NAME>();
      std::vector<cl::Device> found;
      const cl_int status = platform.getDevices(CL_DEVICE_TYPE_ALL, &found);
      if (status == CL_DEVICE_NOT_FOUND) continue; // e.g. rusticl without RUSTICL_ENABLE
      std::vector<cl::Device> chosen;
      for (auto& d : found) {
        const auto label = platform_name + ": " + d.getInfo<CL_DEVICE_NAME>();
        seen.push_back(label);
        if (filter.empty() || lower(label).find(filter) != std::string::npos) chosen.push_back(d);
      }
      if (chosen.empty()) continue;
      auto ctx = std::make_shared<platform_context>();
      ctx->platform = platform;
      ctx->context = cl::Context(chosen);
      ctx->programs = std::make_shared<program_cache>(ctx->context);
      for (auto& d : chosen) {
        auto info = probe_device(platform, d);
        const auto index = topo.devices_.size();
        if (info.budget_pool.empty()) info.budget_pool = "#" + std::to_string(index) + " " + info.name;
        auto& pool = pools[info.budget_pool];
        if (!pool) pool = std::make_shared<occupancy>(info.budget_pool, info.persistent_budget);
        topo.devices_.emplace_back(d, std::move(info), index, ctx, pool);
      }
    } catch (const cl::Error& e) {
      topo.failures_.push_back({platform_name, std::string(opencl_error_name(e.err())) + " (" +
                                                   std::to_string(e.err()) + ") in " + e.what()});
    } catch (const std::exception& e) {
      topo.failures_.push_back({platform_name, e.what()});
    }
  }

  if (topo.devices_.empty()) {
    std::string message;
    if (!filter.empty() && !seen.empty()) {
      // A filter that came from the environment may have been set long before: say where it is.
      const bool from_environment = options.device_filter == discovery_options::default_filter();
      message = "device filter '" + options.device_filter + "'" +
                (from_environment ? " (RINGPIPE_DEVICE_FILTER)" : "") + " matched no device; found:";
      for (const auto& s : seen)
        message += "\n  " + s;
    } else {
      message = "no OpenCL device found: install pocl-opencl-icd (or set RUSTICL_ENABLE=llvmpipe for rusticl)";
    }
    for (const auto& f : topo.failures_)
      message += "\n  platform '" + f.platform + "' failed: " + f.what;
    throw error(errc::no_device, message);
  }

  return topo;
}

topology topology::from_devices(std::vector<device> devices) {
  topology topo;
  topo.devices_ = std::move(devices);
  return topo;
}

} // namespace ringpipe
