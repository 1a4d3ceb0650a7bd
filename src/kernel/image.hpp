#pragma once
// A ring kernel's image: its program built for one device, the kernel object, what the kernel
// declared (message sizes and kind, read once), its group size, state memory and arguments.

#include <ringpipe/device.hpp>
#include <ringpipe/kernel.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringpipe::detail {

constexpr std::uint32_t max_group = 256; // RINGPIPE_MAX_GROUP in cl/ringpipe/stage.clh

class kernel_image {
public:
  /// Builds (or takes from the cache) the program and checks the kernel's declared sizes against
  /// `in_bytes` and `out_bytes` (0: no ring on that side). Throws build_error, or
  /// errc::message_size naming the kernel.
  kernel_image(const device& dev, const kernel_spec& spec, std::size_t in_bytes, std::size_t out_bytes,
               const kernel_options& options);

  const std::string& name() const noexcept { return name_; }
  /// Whether the kernel consumes whole batches and emits at most one result per message.
  bool map_kernel() const noexcept { return map_; }
  /// The group a resident launch's rounds run as (RP_MAP_BODY claims up to this many messages, or
  /// device_info::round_claim where that is more).
  std::uint32_t local_size() const noexcept { return local_size_; }
  /// The group of launches over a batch: a batched launch's rounds (full claims every round, where
  /// PoCL's loops over 64 items run faster than 8 items striding) and span launches (one item a
  /// message, as many groups as the span needs). 64 unless the user or the kernel fixes it.
  std::uint32_t batch_local_size() const noexcept { return batch_local_size_; }
  cl::Kernel& kernel() noexcept { return kernel_; }
  /// The map kernel's span form (NAME__span, stage.clh), if its program defines one; its span
  /// arguments follow the kernel's own at span_args_at().
  cl::Kernel* span_kernel() noexcept { return span_kernel_() != nullptr ? &span_kernel_ : nullptr; }
  unsigned span_args_at() const noexcept { return 3 + static_cast<unsigned>(own_args_set_.size()); }
  /// Sets the kernel's own argument `index` (after RINGPIPE_KERNEL_PARAMS and the state).
  void set_arg(unsigned index, const void* value, std::size_t size);
  void set_arg_svm(unsigned index, void* pointer);
  /// Throws errc::invalid_argument, naming them, if any of the kernel's own arguments is unset.
  void check_args_set() const;
  /// Whether own argument `index` exists and nothing set it yet.
  bool arg_unset(unsigned index) const { return index < own_args_set_.size() && !own_args_set_[index]; }
  /// Drops every OpenCL object, putting its kernel objects back on the program cache's shelf for
  /// the next image of the same kernel (call it once no launch of them runs).
  void release() noexcept;

private:
  /// Launches the map kernel once over scratch memory that asks it to stop (see image.cpp).
  void compile_by_launching(const device& dev, std::size_t slot_bytes);
  void count_args(const kernel_spec& spec);
  /// Clears `k`'s arguments that may hold memory and shelves it (program_cache::shelve_kernel).
  void shelve(cl::Kernel& k, const std::string& name, bool span) noexcept;
  /// The OpenCL position of the kernel's own argument `index`; refused past its last.
  unsigned own_arg_at(unsigned index) const;
  std::string describe_args() const;

  const device* dev_;
  std::string name_;
  bool has_state_ = false;
  bool map_ = false;
  std::vector<bool> own_args_set_;    // the kernel's own arguments, after the fixed ones
  std::vector<bool> own_args_memory_; // of those, the ones that may hold a buffer or SVM pointer
  std::uint64_t compiled_note_ = 0;   // the group sizes it was compiled for by launching; 0: not
  std::uint32_t local_size_ = 1;
  std::uint32_t batch_local_size_ = 1;
  cl::Program program_;
  cl::Kernel kernel_;
  cl::Kernel span_kernel_;
  cl::Buffer state_; // spec.state_bytes of the kernel's own memory
};

/// "no ring" or "16-byte messages".
std::string describe_size(std::size_t bytes);
std::string ms(std::chrono::nanoseconds d);

} // namespace ringpipe::detail
