#pragma once
// An ordered farm's results that came early, by item number, until the next in order comes: a
// ring of message slots indexed by number, which grows (to the next power of two) when a number
// lies beyond it. It allocates only when it grows, where a map kept a node and a copy per result.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace ringpipe::detail {

class reorder_buffer {
public:
  /// Keeps a copy of result `seq` (after next(), not kept already); every message has the first's size.
  void put(std::uint64_t seq, std::span<const std::byte> message) {
    if (bytes_ == 0) bytes_ = message.size();
    if (seq - next_ >= capacity()) grow(seq - next_ + 1);
    const std::size_t at = index(seq);
    std::memcpy(slots_.data() + at * bytes_, message.data(), bytes_);
    present_[at] = 1;
    ++count_;
  }
  /// The next result in order, if kept; take_next() gives it up and moves on.
  const std::byte* next_kept() const noexcept {
    return count_ != 0 && present_[index(next_)] != 0 ? slots_.data() + index(next_) * bytes_ : nullptr;
  }
  void take_next() noexcept {
    present_[index(next_)] = 0;
    --count_;
    ++next_;
  }
  /// The next number in order (results before it were passed on); skip() moves past one passed
  /// on without being kept.
  std::uint64_t next() const noexcept { return next_; }
  void skip() noexcept { ++next_; }
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

private:
  std::size_t capacity() const noexcept { return present_.size(); }
  std::size_t index(std::uint64_t seq) const noexcept { return static_cast<std::size_t>(seq & (capacity() - 1)); }
  void grow(std::uint64_t span) {
    reorder_buffer bigger;
    bigger.bytes_ = bytes_;
    const auto slots = std::bit_ceil(std::max<std::uint64_t>(span, std::max<std::size_t>(64, 2 * capacity())));
    bigger.slots_.resize(static_cast<std::size_t>(slots) * bytes_);
    bigger.present_.assign(static_cast<std::size_t>(slots), 0);
    bigger.next_ = next_;
    for (std::uint64_t seq = next_; seq < next_ + capacity(); ++seq)
      if (present_[index(seq)] != 0) bigger.put(seq, {slots_.data() + index(seq) * bytes_, bytes_});
    *this = std::move(bigger);
  }

  std::size_t bytes_ = 0;
  std::vector<std::byte> slots_;
  std::vector<std::uint8_t> present_; // empty until the first put
  std::uint64_t next_ = 0;
  std::size_t count_ = 0;
};

} // namespace ringpipe::detail
