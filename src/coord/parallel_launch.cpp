// A parallel_for chunk's kernel launches and how long the device spent on them.
#include "parallel_run.hpp"

#include <algorithm>
#include <tuple>

namespace ringpipe::detail {

void launch_chunk(cl::CommandQueue& queue, cl::Kernel& kernel, std::size_t local, index_range r,
                  std::vector<cl::Event>& events) {
  const std::size_t body = r.size() / local * local;
  for (const auto& [first, size, group] :
       {std::tuple{r.first, body, cl::NDRange(local)}, std::tuple{r.first + body, r.size() - body, cl::NullRange}}) {
    if (size == 0) continue;
    cl::Event ran;
    cl_call("clEnqueueNDRangeKernel (parallel_for)", [&, first = first, size = size, group = group] {
      queue.enqueueNDRangeKernel(kernel, cl::NDRange(first), cl::NDRange(size), group, nullptr, &ran);
    });
    events.push_back(std::move(ran));
  }
}

std::size_t chunk_work_group_size(const cl::Kernel& kernel, const device& dev) {
  std::size_t most = 1;
  clGetKernelWorkGroupInfo(kernel(), dev.cl_device()(), CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, nullptr);
  most = std::min(most, dev.info().type == device_type::cpu ? std::size_t{64} : std::size_t{256});
  std::size_t local = 1;
  while (local * 2 <= most)
    local *= 2;
  return local;
}

double profiled_seconds(const std::vector<cl::Event>& commands, double wall) {
  double sum = 0;
  for (const auto& e : commands) {
    cl_ulong start = 0, end = 0;
    if (clGetEventProfilingInfo(e(), CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) != CL_SUCCESS ||
        clGetEventProfilingInfo(e(), CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS || end < start)
      return wall;
    sum += static_cast<double>(end - start) * 1e-9;
  }
  return sum > 0.02 * wall ? sum : wall;
}

} // namespace ringpipe::detail
