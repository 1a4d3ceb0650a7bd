#pragma once
// Where a parallel_for run over split arrays keeps its data: in the arrays' pieces, where they
// are. Nothing is copied; each chunk is positions of one piece's storage, bound to that storage,
// run by the device that holds it, or by a device of its context when that one failed. Chunks
// count positions in piece order (piece 0's elements, then piece 1's, ...): the indices
// themselves unless the layout is cyclic, whose pieces are not contiguous in the index.

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
  /// The piece whose positions (in piece order) hold `at`.
  std::size_t piece_at(std::size_t at) const;
  index_range positions(std::size_t piece) const { return {starts_[piece], starts_[piece + 1]}; }

  std::vector<const device*> lanes_;
  split_layout layout_;
  std::vector<std::size_t> starts_; // per piece, its first position in piece order; then the end
  std::string described_;
  std::vector<std::vector<array_bytes>> storage_; // per argument: its pieces' storage (empty for values)
};

/// Whether any argument is a split array.
bool runs_over_split_arrays(const std::vector<parallel_arg>& args) noexcept;

} // namespace ringpipe::detail
