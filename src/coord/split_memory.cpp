// A parallel_for run over split arrays: chunks bound to the piece that holds them.
#include "split_memory.hpp"

#include <algorithm>

namespace ringpipe::detail {
namespace {

using kind = parallel_arg::kind;

const split_bytes& first_split(const std::vector<parallel_arg>& args) {
  for (const auto& a : args)
    if (a.how == kind::split) return *a.split;
  throw error(errc::invalid_argument, "parallel_for: no split array among the arguments");
}

} // namespace

bool runs_over_split_arrays(const std::vector<parallel_arg>& args) noexcept {
  return std::any_of(args.begin(), args.end(), [](const parallel_arg& a) { return a.how == kind::split; });
}

split_memory::split_memory(const std::vector<const device*>& lanes, const std::vector<parallel_arg>& args)
    : lanes_(lanes), layout_(first_split(args).layout()), starts_{0}, described_(first_split(args).describe()) {
  for (const split_piece& p : layout_.pieces())
    starts_.push_back(starts_.back() + p.size());
  for (const auto& a : args) {
    storage_.emplace_back();
    if (a.how == kind::split)
      for (std::size_t p = 0; p < layout_.pieces().size(); ++p)
        storage_.back().push_back(a.split->storage(p));
  }
}

void split_memory::bind(std::size_t lane, cl::Kernel& kernel, const std::vector<parallel_arg>& args) const {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].how == kind::value || args[i].how == kind::per_device)
      bind_value(lane, kernel, static_cast<cl_uint>(i), args[i]);
}

std::size_t split_memory::piece_at(std::size_t at) const {
  const auto after = std::upper_bound(starts_.begin() + 1, starts_.end(), at);
  if (after == starts_.end())
    throw error(errc::invalid_argument, "position " + std::to_string(at) + " past the pieces of " + described_);
  return static_cast<std::size_t>(after - starts_.begin()) - 1;
}

std::size_t split_memory::bind_chunk(std::size_t, cl::Kernel& kernel, const std::vector<parallel_arg>& args,
                                     index_range r) const {
  const std::size_t p = piece_at(r.first);
  const split_piece& piece = layout_.pieces()[p];
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto index = static_cast<cl_uint>(i);
    if (args[i].how == kind::piece_origin) {
      const auto origin = static_cast<cl_long>(piece.ranges.front().first) - static_cast<cl_long>(layout_.halo());
      cl_call("clSetKernelArg (parallel_for piece_origin)", [&] { kernel.setArg(index, origin); });
    } else if (args[i].how == kind::piece_grain || args[i].how == kind::piece_stride) {
      // Contiguous: the whole storage is one block, so position i is origin + i.
      const std::size_t whole = piece.size() + 2 * layout_.halo();
      const std::size_t v = layout_.grain() == 0               ? whole
                            : args[i].how == kind::piece_grain ? layout_.grain()
                                                               : layout_.stride();
      cl_call("clSetKernelArg (parallel_for piece layout)", [&] { kernel.setArg(index, static_cast<cl_long>(v)); });
    } else if (args[i].how == kind::split) {
      const array_bytes& s = storage_[i][p];
      if (s.memory() == array_memory::shared) {
        if (const cl_int e = clSetKernelArgSVMPointer(kernel(), index, s.data()); e != CL_SUCCESS)
          throw_opencl_error(e, ("clSetKernelArgSVMPointer (parallel_for, " + s.describe() + ")").c_str());
      } else {
        cl_call("clSetKernelArg (parallel_for split array)", [&] { kernel.setArg(index, s.buffer()); });
      }
    }
  }
  // Work-item i of the chunk handles storage position i: the piece's elements start after the halo.
  return layout_.halo() + (r.first - starts_[p]);
}

bool split_memory::reaches(std::size_t lane, index_range r) const {
  const device& holder = *layout_.pieces()[piece_at(r.first)].dev;
  return lanes_[lane] == &holder || lanes_[lane]->shares_context_with(holder);
}

std::vector<std::vector<index_range>> split_memory::owned() const {
  std::vector<std::vector<index_range>> out(lanes_.size());
  for (std::size_t p = 0; p < layout_.pieces().size(); ++p)
    for (std::size_t l = 0; l < lanes_.size(); ++l)
      if (lanes_[l] == layout_.pieces()[p].dev) out[l].push_back(positions(p));
  return out;
}

std::string split_memory::where(index_range r) const {
  const std::size_t p = piece_at(r.first);
  const split_piece& piece = layout_.pieces()[p];
  return "the piece " + std::to_string(p) + " (" + piece.describe() + ") of " + described_ + ", held by " +
         piece.dev->label();
}

} // namespace ringpipe::detail
