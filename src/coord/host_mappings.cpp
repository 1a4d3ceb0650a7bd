#include "host_mappings.hpp"

#include "../core/transfer_service.hpp"

#include <algorithm>

namespace ringpipe::detail {
namespace {

bool mapped_here(const array_bytes& a) {
  return a.memory() == array_memory::buffer && a.dev().info().type == device_type::cpu && a.size_bytes() > 0;
}

cl::CommandQueue& queue_of(const array_bytes& a) { return a.owner().transfer_service()->queue(a.dev()); }

} // namespace

host_mappings::host_mappings(collective_run& run, std::string_view step, const std::vector<array_bytes>& arrays)
    : run_(run), step_(step) {
  // One mapping per buffer, over every view of it in the pass (two maps for writing may not overlap).
  std::vector<std::pair<array_bytes, std::pair<std::size_t, std::size_t>>> ranges;
  for (const auto& a : arrays) {
    if (!run.options().map_cpu_buffers || !mapped_here(a)) continue;
    const std::size_t lo = a.offset_bytes(), hi = lo + a.size_bytes();
    auto r =
        std::find_if(ranges.begin(), ranges.end(), [&](const auto& x) { return x.first.buffer()() == a.buffer()(); });
    if (r == ranges.end())
      ranges.push_back({a, {lo, hi}});
    else
      r->second = {std::min(r->second.first, lo), std::max(r->second.second, hi)};
  }
  std::vector<std::future<cl_int>> maps;
  for (const auto& [a, range] : ranges) {
    cl_int err = CL_SUCCESS;
    cl_event done = nullptr;
    void* at = clEnqueueMapBuffer(queue_of(a)(), a.buffer()(), CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, range.first,
                                  range.second - range.first, 0, nullptr, &done, &err);
    if (err != CL_SUCCESS) {
      try {
        unmap();
      } catch (...) { // the failed map is the failure reported
      }
      run.failed(step, a.dev(),
                 std::make_exception_ptr(
                     error(std::error_code(err, opencl_category()),
                           "clEnqueueMapBuffer of " + a.describe() + " failed with " + opencl_error_name(err))));
    }
    maps_.push_back({a, range.first, static_cast<std::byte*>(at)});
    queue_of(a).flush();
    maps.push_back(ending_of(cl::Event(done)));
  }
  try {
    for (std::size_t i = 0; i < maps.size(); ++i)
      run.wait_ended(step, maps[i], maps_[i].view.dev(), "mapping " + maps_[i].view.describe());
  } catch (...) {
    try {
      unmap();
    } catch (...) { // the late or failed map is the failure reported
    }
    throw;
  }
}

host_mappings::~host_mappings() {
  try {
    unmap();
  } catch (...) { // a failed or late unmap after the pass failed: that failure is the one reported
  }
}

std::byte* host_mappings::where(const array_bytes& a) const {
  if (a.memory() != array_memory::buffer) return nullptr;
  for (const auto& m : maps_)
    if (m.view.buffer()() == a.buffer()()) return m.at + (a.offset_bytes() - m.lo);
  return nullptr;
}

void host_mappings::unmap() {
  std::vector<mapping> left;
  left.swap(maps_); // nothing is unmapped twice, whatever happens below
  std::vector<std::future<cl_int>> unmaps;
  std::vector<const array_bytes*> of;
  for (const auto& m : left) {
    cl_event done = nullptr;
    auto& queue = queue_of(m.view);
    if (const cl_int err = clEnqueueUnmapMemObject(queue(), m.view.buffer()(), m.at, 0, nullptr, &done);
        err != CL_SUCCESS)
      throw_opencl_error(err, "clEnqueueUnmapMemObject (collective)");
    queue.flush();
    unmaps.push_back(ending_of(cl::Event(done)));
    of.push_back(&m.view);
  }
  for (std::size_t i = 0; i < unmaps.size(); ++i)
    run_.wait_ended(step_, unmaps[i], of[i]->dev(), "unmapping " + of[i]->describe());
}

} // namespace ringpipe::detail
