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

} // namespace

split_layout::split_layout(runtime& rt, std::size_t n, const split_options& options, const std::string& what)
    : rt_(&rt), n_(n), halo_(options.halo) {
  const auto devices = detail::devices_named(rt, options.devices, what);
  if (!std::holds_alternative<block_partition>(options.partition) &&
      !std::holds_alternative<weighted_partition>(options.partition))
    throw error(errc::invalid_argument, what + ": a " + ringpipe::describe(options.partition) +
                                            " partition does not give each device one contiguous piece; split "
                                            "arrays take block or weighted partitions");
  const auto parts = split(options.partition, n, devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d)
    for (const index_range& r : parts[d])
      pieces_.push_back({devices[d], r});
  if (pieces_.size() > 1)
    for (const split_piece& p : pieces_)
      if (p.range.size() < halo_)
        throw error(errc::invalid_argument, what + ": the piece " + to_string(p.range) + " on " + p.dev->label() +
                                                " holds " + std::to_string(p.range.size()) +
                                                " elements, fewer than the halo (" + std::to_string(halo_) + ")");
  text_ = ringpipe::describe(options.partition) + " over " + std::to_string(pieces_.size()) +
          (pieces_.size() == 1 ? " device" : " devices") + (halo_ != 0 ? ", halo " + std::to_string(halo_) : "");
}

std::size_t split_layout::piece_of(std::size_t i) const {
  const auto at = std::upper_bound(pieces_.begin(), pieces_.end(), i,
                                   [](std::size_t x, const split_piece& p) { return x < p.range.last; });
  if (at == pieces_.end()) throw error(errc::invalid_argument, "index " + std::to_string(i) + " past " + text_);
  return static_cast<std::size_t>(at - pieces_.begin());
}

bool split_layout::same_as(const split_layout& other) const noexcept {
  if (n_ != other.n_ || halo_ != other.halo_ || pieces_.size() != other.pieces_.size()) return false;
  for (std::size_t p = 0; p < pieces_.size(); ++p)
    if (pieces_[p].dev->index() != other.pieces_[p].dev->index() || pieces_[p].range != other.pieces_[p].range)
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
    storage_.emplace_back(layout_.owner(), *piece.dev, (piece.range.size() + 2 * h) * element_,
                          name_ + " piece " + std::to_string(p) + " " + to_string(piece.range), memory);
  }
}

std::string split_bytes::describe() const { return "split array '" + name_ + "' (" + layout_.describe() + ")"; }

void split_bytes::write_bytes(const void* host, std::chrono::milliseconds timeout) const {
  const auto deadline = clock_type::now() + timeout;
  const std::size_t h = layout_.halo();
  for (std::size_t p = 0; p < storage_.size(); ++p) {
    const index_range r = layout_.pieces()[p].range;
    const std::size_t from = r.first >= h ? r.first - h : 0; // global indices the storage takes
    const std::size_t to = std::min(layout_.size(), r.last + h);
    storage_[p]
        .sub_bytes((from + h - r.first) * element_, (to - from) * element_)
        .write_bytes(static_cast<const std::byte*>(host) + from * element_, left_until(deadline));
  }
}

void split_bytes::read_bytes(void* host, std::chrono::milliseconds timeout) const {
  const auto deadline = clock_type::now() + timeout;
  for (std::size_t p = 0; p < storage_.size(); ++p) {
    const index_range r = layout_.pieces()[p].range;
    storage_[p]
        .sub_bytes(layout_.halo() * element_, r.size() * element_)
        .read_bytes(static_cast<std::byte*>(host) + r.first * element_, left_until(deadline));
  }
}

void split_bytes::exchange_halos(std::chrono::milliseconds timeout) const {
  const std::size_t h = layout_.halo();
  if (h == 0 || storage_.size() < 2) return;
  const std::size_t bytes = h * element_;
  std::vector<std::pair<array_bytes, array_bytes>> copies; // from, to
  for (std::size_t p = 0; p + 1 < storage_.size(); ++p) {
    const std::size_t count = layout_.pieces()[p].range.size();
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
  std::vector<std::pair<array_bytes, array_bytes>> copies;
  for (std::size_t q = 0; q < storage_.size(); ++q)
    for (std::size_t p = 0; p < to.storage_.size(); ++p) {
      const index_range a = layout_.pieces()[q].range, b = to.layout_.pieces()[p].range;
      const std::size_t first = std::max(a.first, b.first), last = std::min(a.last, b.last);
      if (first >= last) continue;
      const std::size_t bytes = (last - first) * element_;
      copies.emplace_back(storage_[q].sub_bytes((layout_.halo() + first - a.first) * element_, bytes),
                          to.storage_[p].sub_bytes((to.layout_.halo() + first - b.first) * element_, bytes));
    }
  const collective_options o{.name = name_, .timeout = timeout};
  detail::collective_run("split array", o).copies("redistribution into " + to.describe(), copies);
  to.exchange_halos(left_until(deadline));
}

} // namespace ringpipe
