// Split arrays: the layout (contiguous pieces on devices, with halos), each piece's storage, and
// the copies that fill, read and refresh them.
#include "collective_steps.hpp"
#include "device_list.hpp"

#include <ringpipe/split_array.hpp>

#include <algorithm>

namespace ringpipe {
namespace {

using clock_type = std::chrono::steady_clock;

std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  return std::max(left, std::chrono::milliseconds(1));
}

/// Elements contiguous in a piece of one layout and in a piece of another.
struct copy_run {
  std::size_t from_piece, from_position, to_piece, to_position, count;
};

struct stored_range {
  index_range range;
  std::size_t piece, position; // where range.first is stored
};

/// Every range of `layout`'s pieces, in index order.
std::vector<stored_range> stored_ranges(const split_layout& layout) {
  std::vector<stored_range> out;
  for (std::size_t p = 0; p < layout.pieces().size(); ++p)
    for (const index_range& r : layout.pieces()[p].ranges)
      out.push_back({r, p, layout.position_of(r.first)});
  std::sort(out.begin(), out.end(),
            [](const stored_range& a, const stored_range& b) { return a.range.first < b.range.first; });
  return out;
}

/// What a copy from layout `a` into layout `b` moves, swept in index order, each run as long as
/// both sides keep it contiguous.
std::vector<copy_run> copy_runs(const split_layout& a, const split_layout& b) {
  const auto from = stored_ranges(a), to = stored_ranges(b);
  std::vector<copy_run> runs;
  for (std::size_t i = 0, j = 0; i < from.size() && j < to.size();) {
    const stored_range &x = from[i], &y = to[j];
    const std::size_t first = std::max(x.range.first, y.range.first);
    const std::size_t last = std::min(x.range.last, y.range.last);
    const copy_run run{x.piece, x.position + first - x.range.first, y.piece, y.position + first - y.range.first,
                       last - first};
    copy_run* prev = runs.empty() ? nullptr : &runs.back();
    if (prev && prev->from_piece == run.from_piece && prev->to_piece == run.to_piece &&
        prev->from_position + prev->count == run.from_position && prev->to_position + prev->count == run.to_position)
      prev->count += run.count;
    else
      runs.push_back(run);
    i += x.range.last == last ? 1 : 0; // both sides tile [0, n): step past what ended here
    j += y.range.last == last ? 1 : 0;
  }
  return runs;
}

} // namespace

std::size_t split_piece::size() const noexcept {
  std::size_t total = 0;
  for (const index_range& r : ranges)
    total += r.size();
  return total;
}

std::string split_piece::describe() const {
  if (ranges.size() == 1) return to_string(ranges.front());
  return std::to_string(ranges.size()) + " blocks from " + std::to_string(ranges.front().first);
}

split_layout::split_layout(runtime& rt, std::size_t n, const split_options& options, const std::string& what)
    : rt_(&rt), n_(n), halo_(options.halo) {
  const auto devices = detail::devices_named(rt, options.devices, what);
  if (std::holds_alternative<dynamic_partition>(options.partition))
    throw error(errc::invalid_argument, what + ": a dynamic partition splits while a run goes; split arrays take "
                                               "block, weighted or cyclic partitions");
  if (const auto* c = std::get_if<cyclic_partition>(&options.partition)) {
    if (halo_ != 0)
      throw error(errc::invalid_argument, what + ": a " + ringpipe::describe(options.partition) +
                                              " partition with a halo of " + std::to_string(halo_) +
                                              ": halos are kept of contiguous pieces (block or weighted partitions)");
    grain_ = c->grain; // a zero grain is refused by split()
  }
  const auto parts = split(options.partition, n, devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d)
    if (!parts[d].empty()) pieces_.push_back({devices[d], parts[d]});
  if (pieces_.size() > 1)
    for (const split_piece& p : pieces_)
      if (p.size() < halo_)
        throw error(errc::invalid_argument, what + ": the piece " + p.describe() + " on " + p.dev->label() + " holds " +
                                                std::to_string(p.size()) + " elements, fewer than the halo (" +
                                                std::to_string(halo_) + ")");
  text_ = ringpipe::describe(options.partition) + " over " + std::to_string(pieces_.size()) +
          (pieces_.size() == 1 ? " device" : " devices") + (halo_ != 0 ? ", halo " + std::to_string(halo_) : "");
}

std::size_t split_layout::piece_of(std::size_t i) const {
  if (i >= n_) throw error(errc::invalid_argument, "index " + std::to_string(i) + " past " + text_);
  // Cyclic: block b is the (b / pieces)-th of piece b % pieces (devices given no block hold no piece).
  if (grain_ != 0) return (i / grain_) % pieces_.size();
  const auto at = std::upper_bound(pieces_.begin(), pieces_.end(), i,
                                   [](std::size_t x, const split_piece& p) { return x < p.ranges.front().last; });
  return static_cast<std::size_t>(at - pieces_.begin());
}

std::size_t split_layout::position_of(std::size_t i) const {
  const std::size_t p = piece_of(i);
  if (grain_ != 0) return (i / grain_ / pieces_.size()) * grain_ + i % grain_;
  return halo_ + i - pieces_[p].ranges.front().first;
}

bool split_layout::same_as(const split_layout& other) const noexcept {
  if (n_ != other.n_ || halo_ != other.halo_ || pieces_.size() != other.pieces_.size()) return false;
  for (std::size_t p = 0; p < pieces_.size(); ++p)
    if (pieces_[p].dev->index() != other.pieces_[p].dev->index() || pieces_[p].ranges != other.pieces_[p].ranges)
      return false;
  return true;
}

split_bytes::split_bytes(runtime& rt, std::size_t n, std::size_t element, std::string name,
                         const split_options& options)
    : layout_(rt, n, options, "split array '" + name + "'"), element_(element), name_(std::move(name)) {
  allocate(options.memory);
}

split_bytes::split_bytes(const split_layout& layout, std::size_t element, std::string name,
                         std::optional<array_memory> memory)
    : layout_(layout), element_(element), name_(std::move(name)) {
  allocate(memory);
}

void split_bytes::allocate(std::optional<array_memory> memory) {
  const std::size_t h = layout_.halo();
  for (std::size_t p = 0; p < layout_.pieces().size(); ++p) {
    const split_piece& piece = layout_.pieces()[p];
    storage_.emplace_back(layout_.owner(), *piece.dev, (piece.size() + 2 * h) * element_,
                          name_ + " piece " + std::to_string(p) + " " + piece.describe(), memory);
  }
}

std::string split_bytes::describe() const { return "split array '" + name_ + "' (" + layout_.describe() + ")"; }

void split_bytes::write_bytes(const void* host, std::chrono::milliseconds timeout) const {
  const auto deadline = clock_type::now() + timeout;
  const std::size_t h = layout_.halo();
  const auto* from_host = static_cast<const std::byte*>(host);
  for (std::size_t p = 0; p < storage_.size(); ++p) {
    const split_piece& piece = layout_.pieces()[p];
    if (piece.ranges.size() > 1) { // cyclic (no halo): its blocks gathered, then one write
      std::vector<std::byte> blocks;
      blocks.reserve(piece.size() * element_);
      for (const index_range& r : piece.ranges)
        blocks.insert(blocks.end(), from_host + r.first * element_, from_host + r.last * element_);
      storage_[p].sub_bytes(0, blocks.size()).write_bytes(blocks.data(), left_until(deadline));
      continue;
    }
    const index_range r = piece.ranges.front();
    const std::size_t from = r.first >= h ? r.first - h : 0; // global indices the storage takes
    const std::size_t to = std::min(layout_.size(), r.last + h);
    storage_[p]
        .sub_bytes((from + h - r.first) * element_, (to - from) * element_)
        .write_bytes(from_host + from * element_, left_until(deadline));
  }
}

void split_bytes::read_bytes(void* host, std::chrono::milliseconds timeout) const {
  const auto deadline = clock_type::now() + timeout;
  auto* to_host = static_cast<std::byte*>(host);
  for (std::size_t p = 0; p < storage_.size(); ++p) {
    const split_piece& piece = layout_.pieces()[p];
    if (piece.ranges.size() > 1) { // cyclic: one read, then its blocks scattered
      std::vector<std::byte> blocks(piece.size() * element_);
      storage_[p].sub_bytes(0, blocks.size()).read_bytes(blocks.data(), left_until(deadline));
      std::size_t at = 0;
      for (const index_range& r : piece.ranges) {
        std::copy_n(blocks.data() + at, r.size() * element_, to_host + r.first * element_);
        at += r.size() * element_;
      }
      continue;
    }
    const index_range r = piece.ranges.front();
    storage_[p]
        .sub_bytes(layout_.halo() * element_, r.size() * element_)
        .read_bytes(to_host + r.first * element_, left_until(deadline));
  }
}

void split_bytes::exchange_halos(std::chrono::milliseconds timeout) const {
  const std::size_t h = layout_.halo();
  if (h == 0 || storage_.size() < 2) return;
  const std::size_t bytes = h * element_;
  std::vector<std::pair<array_bytes, array_bytes>> copies; // from, to
  for (std::size_t p = 0; p + 1 < storage_.size(); ++p) {
    const std::size_t count = layout_.pieces()[p].size();
    const array_bytes &left = storage_[p], &right = storage_[p + 1];
    copies.emplace_back(left.sub_bytes(count * element_, bytes), right.sub_bytes(0, bytes));
    copies.emplace_back(right.sub_bytes(bytes, bytes), left.sub_bytes((h + count) * element_, bytes));
  }
  const collective_options o{.name = name_, .timeout = timeout};
  detail::collective_run("split array", o).copies("halo exchange", copies);
}

void split_bytes::copy_into(const split_bytes& to, std::chrono::milliseconds timeout) const {
  const auto deadline = clock_type::now() + timeout;
  if (to.layout_.size() != layout_.size() || to.element_ != element_)
    throw error(errc::invalid_argument, describe() + " cannot be copied into " + to.describe() + ": " +
                                            std::to_string(layout_.size()) + " elements of " +
                                            std::to_string(element_) + " bytes against " +
                                            std::to_string(to.layout_.size()) + " of " + std::to_string(to.element_));
  const auto runs = copy_runs(layout_, to.layout_);
  if (runs.size() > max_device_copies) { // many small blocks: two bulk copies cost less
    std::vector<std::byte> staged(layout_.size() * element_);
    read_bytes(staged.data(), left_until(deadline));
    to.write_bytes(staged.data(), left_until(deadline));
    return;
  }
  std::vector<std::pair<array_bytes, array_bytes>> copies;
  copies.reserve(runs.size());
  for (const copy_run& c : runs)
    copies.emplace_back(storage_[c.from_piece].sub_bytes(c.from_position * element_, c.count * element_),
                        to.storage_[c.to_piece].sub_bytes(c.to_position * element_, c.count * element_));
  const collective_options o{.name = name_, .timeout = timeout};
  detail::collective_run("split array", o).copies("redistribution into " + to.describe(), copies);
  to.exchange_halos(left_until(deadline));
}

} // namespace ringpipe
