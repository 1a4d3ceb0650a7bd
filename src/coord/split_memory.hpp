#pragma once
// Where a parallel_for run over split arrays keeps its data: in the arrays' pieces, where they
// are. Nothing is copied; each chunk is one piece's range, bound to that piece's storage, run by
// the device that holds it, or by a device of its context when that one failed.

#include "parallel_memory.hpp"

#include <ringpipe/split_array.hpp>

namespace ringpipe::detail {

class split_memory final : public chunk_memory {
public:
  /// Keeps the split arrays among `args` alive for the run (the arguments were checked: one
  /// layout, every piece on one of the lanes).
  split_memory(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args);

  void bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const override;
  std::size_t bind_chunk(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args,
                         index_range r) const override;
  bool reaches(std::size_t lane, index_range r) const override;
  std::vector<std::vector<index_range>> owned() const override;
  std::string where(index_range r) const override;

private:
  std::vector<const device*> lanes_;
  split_layout layout_;
  std::string described_;
  std::vector<std::vector<array_bytes>> storage_; // per argument: its pieces' storage (empty for values)
};

/// Whether any argument is a split array.
bool runs_over_split_arrays(const std::vector<parallel_arg>& args) noexcept;

} // namespace ringpipe::detail
