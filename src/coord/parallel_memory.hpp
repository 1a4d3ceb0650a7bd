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

/// Where a run's data lives, as its scheduler sees it.
class chunk_memory {
public:
  virtual ~chunk_memory() = default;
  /// Sets the arguments of lane `l`'s kernel that hold for the whole run.
  virtual void bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const = 0;
  /// Sets the arguments that depend on chunk `r` (before it is enqueued on lane `l`); returns the
  /// launch's global offset.
  virtual std::size_t bind_chunk(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args,
                                 index_range r) const = 0;
  /// Whether lane `l` reaches chunk `r`'s data.
  virtual bool reaches(std::size_t lane, index_range r) const = 0;
  /// The ranges each lane must run, where the data decides (empty: the partition decides).
  virtual std::vector<std::vector<index_range>> owned() const { return {}; }
  /// How errors name chunk `r`'s data when no device is left that reaches it.
  virtual std::string where(index_range r) const = 0;
  /// Enqueue the whole inputs (once, before the first chunk) and the chunk's inputs.
  virtual void write_whole(std::size_t, cl::CommandQueue&, std::vector<cl::Event>&) const {}
  virtual void write_chunk(std::size_t, cl::CommandQueue&, index_range, std::vector<cl::Event>&) const {}
  /// Enqueue reading the chunk's outputs back into staging.
  virtual void read_chunk(std::size_t, cl::CommandQueue&, index_range, std::vector<cl::Event>&) {}
  /// Copies the ended chunk's outputs into the user's arrays (calling thread only).
  virtual void deliver(std::size_t, index_range, const std::vector<parallel_arg>&) const {}
};

/// Sets a value or per_device argument of lane `l`'s kernel.
void bind_value(std::size_t lane, cl::Kernel& kernel, cl_uint index, const parallel_arg& a);

/// Host arrays: copied to and from the devices by the run.
class run_memory final : public chunk_memory {
public:
  /// Allocates every array argument for the run's devices and copies the inputs in (shared
  /// memory and staging). Refused with the sizes beyond a device's largest allocation.
  run_memory(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args, std::size_t n,
             const std::string& what);

  /// Whether a run of `n` items over `args` on `lanes` has arrays of these very sizes, so that it
  /// can run in this memory (parallel_kernel keeps its last run's: 64 MiB allocated and touched
  /// afresh each run took 16-30 ms of a 250 ms run on two CPU devices).
  bool fits(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args, std::size_t n) const;
  /// Copies the inputs of `args` in (the constructor does for its own run).
  void refill(const std::vector<parallel_arg>& args);

  /// Whether lane `l` reaches the arrays through shared memory (no commands move its data).
  bool shared(std::size_t lane) const noexcept { return group_of_[lane] >= 0; }
  void bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const override;
  std::size_t bind_chunk(std::size_t, cl::Kernel&, const std::vector<parallel_arg>&, index_range r) const override {
    return r.first;
  }
  bool reaches(std::size_t, index_range) const override { return true; }
  std::string where(index_range) const override { return "host arrays"; }
  void write_whole(std::size_t lane, cl::CommandQueue& queue, std::vector<cl::Event>& events) const override;
  void write_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r,
                   std::vector<cl::Event>& events) const override;
  void read_chunk(std::size_t lane, cl::CommandQueue& queue, index_range r, std::vector<cl::Event>& events) override;
  void deliver(std::size_t lane, index_range r, const std::vector<parallel_arg>& args) const override;

private:
  struct array_memory {
    parallel_arg::kind how = parallel_arg::kind::value;
    std::size_t element = 0;                       // bytes of one element
    std::size_t bytes = 0;                         // of the whole array
    std::unique_ptr<std::byte[]> staging;          // buffer lanes' host side (not zeroed: chunks fill it)
    std::map<int, std::shared_ptr<svm_block>> svm; // per shared group
    std::vector<cl::Buffer> buffers;               // per buffer lane (empty for shared lanes)
  };
  std::vector<int> group_of_; // per lane: its shared group, or -1
  std::vector<array_memory> arrays_;
  std::vector<const device*> lanes_;
  std::size_t n_ = 0;
};

} // namespace ringpipe::detail
