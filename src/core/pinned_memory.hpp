#pragma once
// Pinned host memory: a driver-allocated buffer mapped once, which devices copy by DMA (on CPU
// devices it is ordinary memory). Batches cross between host rings and device memory through it.

#include <ringpipe/opencl.hpp>

#include <algorithm>
#include <cstddef>

namespace ringpipe::detail {

class pinned_memory {
public:
  pinned_memory() = default;
  /// Allocates and maps `bytes` (at least 4) through `queue`.
  pinned_memory(const cl::Context& context, cl::CommandQueue& queue, std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 4);
    buffer_ = cl::Buffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes);
    data_ = static_cast<std::byte*>(queue.enqueueMapBuffer(buffer_, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes));
  }
  std::byte* data() const noexcept { return data_; }
  /// Unmaps through `queue`; the caller finishes the queue before releasing the buffer.
  void unmap(cl::CommandQueue& queue) noexcept {
    if (data_ == nullptr) return;
    clEnqueueUnmapMemObject(queue(), buffer_(), data_, 0, nullptr, nullptr);
    data_ = nullptr;
  }
  void release() noexcept { buffer_ = cl::Buffer(); }

private:
  cl::Buffer buffer_;
  std::byte* data_ = nullptr;
};

} // namespace ringpipe::detail
