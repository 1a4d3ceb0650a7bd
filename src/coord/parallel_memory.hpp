#pragma once
// Where a parallel_for run keeps its arrays: per context whose devices share fine-grained SVM, one
// shared copy of each array (filled by the host before the run, read by the host as chunks end);
// per other device, a buffer of each array filled and emptied by chunk-sized commands through
// host staging the run owns. The user's own memory is touched only by the calling thread, so a
// run that times out leaves nothing writing into it; the run's memory lives until its last
// command ended (the event callbacks hold it).

#include <ringpipe/parallel_for.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ringpipe::detail {

/// Fine-grained SVM of one context.
class svm_block {
public:
  svm_block(const device& dev, std::size_t bytes);
  ~svm_block();
  svm_block(const svm_block&) = delete;
  svm_block& operator=(const svm_block&) = delete;
  std::byte* data() const noexcept { return data_; }

private:
  cl::Context context_;
  std::byte* data_ = nullptr;
};

class run_memory {
public:
  /// Allocates every array argument for the run's devices and copies the inputs in (shared
  /// memory and staging). Refused with the sizes beyond a device's largest allocation.
  run_memory(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args, std::size_t n,
             const std::string& what);

  /// Whether lane `l` reaches the arrays through shared memory (no commands move its data).
  bool shared(std::size_t lane) const noexcept { return group_of_[lane] >= 0; }
  /// Sets every argument of lane `l`'s kernel.
  void bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const;
  /// Buffer lanes: enqueue the whole inputs (once, before the first chunk) and the chunk's inputs.
  void write_whole(std::size_t lane, cl::CommandQueue& queue, std::vector<cl::Event>& events) const;
  void write_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r, std::vector<cl::Event>& events) const;
  /// Buffer lanes: enqueue reading the chunk's outputs back into staging.
  void read_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r, std::vector<cl::Event>& events);
  /// Copies the ended chunk's outputs into the user's arrays (calling thread only).
  void deliver(std::size_t lane, index_range r, const std::vector<parallel_arg>& args) const;

private:
  struct array_memory {
    parallel_arg::kind how = parallel_arg::kind::value;
    std::size_t element = 0;                       // bytes of one element
    std::size_t bytes = 0;                         // of the whole array
    std::vector<std::byte> staging;                // buffer lanes' host side
    std::map<int, std::shared_ptr<svm_block>> svm; // per shared group
    std::vector<cl::Buffer> buffers;               // per buffer lane (empty for shared lanes)
  };
  std::vector<int> group_of_; // per lane: its shared group, or -1
  std::vector<array_memory> arrays_;
  std::vector<const device*> lanes_;
};

} // namespace ringpipe::detail
