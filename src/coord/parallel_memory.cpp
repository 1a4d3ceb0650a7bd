// A parallel_for run's arrays: shared SVM per context group, buffers and staging elsewhere.
#include "parallel_memory.hpp"

#include <cstring>

namespace ringpipe::detail {
namespace {

using kind = parallel_arg::kind;

bool is_array(kind k) { return k == kind::chunk_input || k == kind::whole_input || k == kind::output; }
bool is_input(kind k) { return k == kind::chunk_input || k == kind::whole_input; }

std::string mib(std::size_t bytes) {
  return std::to_string(static_cast<double>(bytes) / 1024.0 / 1024.0).substr(0, 6) + " MiB";
}

void check_fits(const device& d, std::size_t bytes, std::size_t index, const std::string& what) {
  if (bytes > d.info().max_alloc)
    throw error(errc::out_of_memory, what + ": argument " + std::to_string(index) + " needs " + mib(bytes) +
                                         ", more than the largest allocation of " + d.label() + " (" +
                                         mib(d.info().max_alloc) + ")");
}

} // namespace

void bind_value(std::size_t lane, cl::Kernel& kernel, cl_uint index, const parallel_arg& a) {
  const std::byte* value = a.values.data() + (a.how == kind::per_device ? lane * a.element : 0);
  cl_call("clSetKernelArg (parallel_for)", [&] { kernel.setArg(index, a.element, value); });
}

svm_block::svm_block(const device& dev, std::size_t bytes) : context_(dev.context()) {
  data_ = static_cast<std::byte*>(
      clSVMAlloc(context_(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, std::max<std::size_t>(bytes, 1), 0));
  if (data_ == nullptr)
    throw error(errc::out_of_memory, "clSVMAlloc of " + mib(bytes) + " on " + dev.label() + " failed");
}

svm_block::~svm_block() { clSVMFree(context_(), data_); }

run_memory::run_memory(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args, std::size_t n,
                       const std::string& what)
    : lanes_(lanes) {
  // Lanes whose devices share fine-grained SVM of one context form one group.
  std::vector<const device*> group_first;
  for (const device* d : lanes) {
    int group = -1;
    if (d->info().svm.fine_buffer) {
      for (std::size_t g = 0; g < group_first.size() && group < 0; ++g)
        if (group_first[g]->shares_context_with(*d)) group = static_cast<int>(g);
      if (group < 0) {
        group = static_cast<int>(group_first.size());
        group_first.push_back(d);
      }
    }
    group_of_.push_back(group);
  }
  bool any_buffer_lane = false;
  for (int g : group_of_)
    any_buffer_lane = any_buffer_lane || g < 0;

  for (std::size_t i = 0; i < args.size(); ++i) {
    const parallel_arg& a = args[i];
    array_memory m;
    m.how = a.how;
    m.element = a.element;
    m.bytes = a.element * (a.how == kind::whole_input ? a.count : n);
    if (is_array(a.how)) {
      for (const device* d : lanes)
        check_fits(*d, m.bytes, i, what);
      if (any_buffer_lane) m.staging = std::make_unique_for_overwrite<std::byte[]>(std::max<std::size_t>(m.bytes, 1));
      for (std::size_t g = 0; g < group_first.size(); ++g)
        m.svm.emplace(static_cast<int>(g), std::make_shared<svm_block>(*group_first[g], m.bytes));
      for (std::size_t l = 0; l < lanes.size(); ++l)
        m.buffers.push_back(group_of_[l] >= 0 ? cl::Buffer() : cl_call("clCreateBuffer (parallel_for)", [&] {
          return cl::Buffer(lanes[l]->context(), CL_MEM_READ_WRITE, std::max<std::size_t>(m.bytes, 1));
        }));
    }
    arrays_.push_back(std::move(m));
  }
  n_ = n;
  refill(args);
}

bool run_memory::fits(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args,
                      std::size_t n) const {
  if (lanes != lanes_ || n != n_ || args.size() != arrays_.size()) return false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    const auto& m = arrays_[i];
    if (a.how != m.how || a.element != m.element ||
        (is_array(a.how) && m.bytes != a.element * (a.how == kind::whole_input ? a.count : n)))
      return false;
  }
  return true;
}

void run_memory::refill(const std::vector<parallel_arg>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto& m = arrays_[i];
    if (!is_input(m.how) || m.bytes == 0) continue;
    if (m.staging) std::memcpy(m.staging.get(), args[i].from, m.bytes);
    for (auto& [group, block] : m.svm)
      std::memcpy(block->data(), args[i].from, m.bytes);
  }
}

void run_memory::bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto index = static_cast<cl_uint>(i);
    const parallel_arg& a = args[i];
    if (a.how == kind::value || a.how == kind::per_device) {
      bind_value(lane, kernel, index, a);
    } else if (group_of_[lane] >= 0) {
      if (const cl_int e = clSetKernelArgSVMPointer(kernel(), index, arrays_[i].svm.at(group_of_[lane])->data());
          e != CL_SUCCESS)
        throw_opencl_error(e, "clSetKernelArgSVMPointer (parallel_for)");
    } else {
      cl_call("clSetKernelArg (parallel_for)", [&] { kernel.setArg(index, arrays_[i].buffers[lane]); });
    }
  }
}

void run_memory::write_whole(std::size_t lane, cl::CommandQueue& queue, std::vector<cl::Event>& events) const {
  if (shared(lane)) return;
  for (const auto& m : arrays_)
    if (m.how == kind::whole_input && m.bytes != 0) {
      cl::Event e;
      cl_call("clEnqueueWriteBuffer (parallel_for)",
              [&] { queue.enqueueWriteBuffer(m.buffers[lane], CL_FALSE, 0, m.bytes, m.staging.get(), nullptr, &e); });
      events.push_back(std::move(e));
    }
}

void run_memory::write_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r,
                             std::vector<cl::Event>& events) const {
  if (shared(lane)) return;
  for (const auto& m : arrays_)
    if (m.how == kind::chunk_input) {
      cl::Event e;
      cl_call("clEnqueueWriteBuffer (parallel_for chunk)", [&] {
        queue.enqueueWriteBuffer(m.buffers[lane], CL_FALSE, r.first * m.element, r.size() * m.element,
                                 m.staging.get() + r.first * m.element, nullptr, &e);
      });
      events.push_back(std::move(e));
    }
}

void run_memory::read_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r, std::vector<cl::Event>& events) {
  if (shared(lane)) return;
  for (auto& m : arrays_)
    if (m.how == kind::output) {
      cl::Event e;
      cl_call("clEnqueueReadBuffer (parallel_for chunk)", [&] {
        queue.enqueueReadBuffer(m.buffers[lane], CL_FALSE, r.first * m.element, r.size() * m.element,
                                m.staging.get() + r.first * m.element, nullptr, &e);
      });
      events.push_back(std::move(e));
    }
}

void run_memory::deliver(std::size_t lane, index_range r, const std::vector<parallel_arg>& args) const {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const array_memory& m = arrays_[i];
    if (m.how != kind::output || r.empty()) continue;
    const std::byte* from = shared(lane) ? m.svm.at(group_of_[lane])->data() : m.staging.get();
    std::memcpy(static_cast<std::byte*>(args[i].to) + r.first * m.element, from + r.first * m.element,
                r.size() * m.element);
  }
}

} // namespace ringpipe::detail
