#pragma once
// An array of n elements split over devices: each device keeps its piece (a device_array, in
// shared memory where the device has it) for as long as the array lives, and parallel_for runs
// each piece's indices on the device that holds it, so the data never crosses the host between
// runs. Each device holds one piece. Under a block or weighted partition a piece is one contiguous
// range and may keep `halo` elements of each neighbour, refreshed by exchange_halos() with peer
// copies on the path choose_copy() gives. Under a cyclic partition a piece is every D-th block of
// `grain` elements (D devices), stored one block after another, so that work whose cost grows
// along the index is spread evenly; cyclic pieces have no halos.
//
// A kernel sees its piece: work-item get_global_id(0) handles the element at that position of the
// piece's storage, whose first `halo` elements are the left neighbour's (so x[i - 1] and x[i + 1]
// are the neighbours of x[i] up to the halo). Kernels that need the global index take
// `piece_origin`, `piece_grain` and `piece_stride` (longs: the global index of storage position 0,
// the elements per block, the global indices from one block to the next); under every layout
// position i is global index origin + (i / grain) * stride + i % grain (origin + i when contiguous).
//
//   ringpipe::split_array<float> x(rt, n, "x", {.halo = 1}), y(x.layout(), "y");
//   x.write(host);
//   const char* blur = "__kernel void blur(__global const float* x, __global float* y) {"
//                      "  size_t i = get_global_id(0); y[i] = (x[i - 1] + x[i] + x[i + 1]) / 3; }";
//   ringpipe::parallel_for(rt, {blur, "blur"}, n, x, y);   // each device on its own piece
//   x.exchange_halos();

#include <ringpipe/array.hpp>
#include <ringpipe/parallel_for.hpp>
#include <ringpipe/partition.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringpipe {

struct split_options {
  partitioner partition = block_partition{};         ///< block, weighted (by device) or cyclic
  std::vector<std::size_t> devices = {};             ///< positions in runtime::devices(); empty: every device
  std::size_t halo = 0;                              ///< elements kept of each neighbour, on each side
  std::optional<array_memory> memory = std::nullopt; ///< default: shared where the device has it
};

/// One device's part: the elements `ranges` of the array (one range unless the layout is cyclic),
/// stored one after another, with `halo` more on each side.
struct split_piece {
  const device* dev = nullptr;
  std::vector<index_range> ranges; ///< in index order
  /// The elements it holds (not counting halos).
  std::size_t size() const noexcept;
  /// "[first, last)", or "12 blocks from 64" when cyclic: how names and errors show it.
  std::string describe() const;
};

/// Where the elements of a split array live. Devices the partition gives nothing hold no piece.
class split_layout {
public:
  /// Refused (errc::invalid_argument, naming `what`): a dynamic partition, a cyclic one with a
  /// halo, a device named twice or missing, a piece smaller than the halo.
  split_layout(runtime& rt, std::size_t n, const split_options& options, const std::string& what = "split layout");

  runtime& owner() const noexcept { return *rt_; }
  std::size_t size() const noexcept { return n_; }
  std::size_t halo() const noexcept { return halo_; }
  const std::vector<split_piece>& pieces() const noexcept { return pieces_; }
  /// The piece that holds global index `i` (i < size()).
  std::size_t piece_of(std::size_t i) const;
  /// Where global index `i` is in its piece's storage (counting the halo before it).
  std::size_t position_of(std::size_t i) const;
  /// Cyclic layouts: elements per block, and the global indices from a piece's block to its next
  /// (grain x pieces). Both 0 when the pieces are contiguous.
  std::size_t grain() const noexcept { return grain_; }
  std::size_t stride() const noexcept { return grain_ * pieces_.size(); }
  /// "block over 2 devices, halo 1".
  const std::string& describe() const noexcept { return text_; }
  /// The same pieces on the same devices with the same halo.
  bool same_as(const split_layout& other) const noexcept;

private:
  runtime* rt_;
  std::size_t n_;
  std::size_t halo_;
  std::size_t grain_ = 0; // cyclic: elements per block; 0: contiguous pieces
  std::vector<split_piece> pieces_;
  std::string text_;
};

/// A split array without its element type.
class split_bytes {
public:
  static constexpr std::size_t max_device_copies = 4096;

  split_bytes(runtime& rt, std::size_t n, std::size_t element, std::string name, const split_options& options);
  split_bytes(const split_layout& layout, std::size_t element, std::string name,
              std::optional<array_memory> memory = std::nullopt);

  const split_layout& layout() const noexcept { return layout_; }
  const std::string& name() const noexcept { return name_; }
  std::size_t element_bytes() const noexcept { return element_; }
  /// Piece p's storage: its elements with the halos on both sides.
  const array_bytes& storage(std::size_t p) const { return storage_.at(p); }
  /// "split array 'x' (block over 2 devices, halo 1)": how errors name it.
  std::string describe() const;

  /// Every piece gets its elements and its halos from `host` (size() elements); halos beyond the
  /// array's ends are left as they are. Blocking; host memory is touched only before this returns.
  void write_bytes(const void* host, std::chrono::milliseconds timeout) const;
  /// Every piece's own elements (not its halos) into `host`.
  void read_bytes(void* host, std::chrono::milliseconds timeout) const;
  /// Each piece's halos get its neighbours' edge elements (device to device, every copy at once).
  void exchange_halos(std::chrono::milliseconds timeout) const;
  /// Copies every element into `to` (the same size, any layout): each part of a piece straight
  /// into the piece of `to` that holds it, device to device (one copy per run of elements that
  /// is contiguous on both sides; through the host when that would be more than
  /// max_device_copies copies, as cyclic layouts of small grain give); then `to`'s halos are
  /// exchanged.
  void copy_into(const split_bytes& to, std::chrono::milliseconds timeout) const;

private:
  void allocate(std::optional<array_memory> memory);
  split_layout layout_;
  std::size_t element_;
  std::string name_;
  std::vector<array_bytes> storage_;
};

/// A typed split array. Copies are shallow: a copy of the handle names the same pieces.
template <class T> class split_array : public split_bytes {
  static_assert(std::is_trivially_copyable_v<T>, "split arrays hold trivially copyable elements");

public:
  using value_type = T;
  split_array(runtime& rt, std::size_t n, std::string name = "split array", const split_options& options = {})
      : split_bytes(rt, n, sizeof(T), std::move(name), options) {}
  /// Another array laid out like `layout` (so one parallel_for can take both).
  split_array(const split_layout& layout, std::string name, std::optional<array_memory> memory = std::nullopt)
      : split_bytes(layout, sizeof(T), std::move(name), memory) {}

  std::size_t size() const noexcept { return layout().size(); }
  /// Piece p's storage (its elements with the halos), as a device array: copies, collectives and
  /// kernels take it.
  device_array<T> piece(std::size_t p) const { return device_array<T>(storage(p)); }

  void write(std::span<const T> from, std::chrono::milliseconds timeout = default_copy_timeout) const {
    check_size(from.size());
    write_bytes(from.data(), timeout);
  }
  void read(std::span<T> to, std::chrono::milliseconds timeout = default_copy_timeout) const {
    check_size(to.size());
    read_bytes(to.data(), timeout);
  }
  void exchange_halos(std::chrono::milliseconds timeout = default_copy_timeout) const {
    split_bytes::exchange_halos(timeout);
  }
  /// The same elements in a new array laid out as `to` (e.g. weighted by_measured_speed() of a
  /// run): the elements whose device changes are copied device to device, none through the caller.
  split_array redistributed(const split_layout& to, std::string name,
                            std::chrono::milliseconds timeout = default_copy_timeout) const {
    split_array out(to, std::move(name));
    copy_into(out, timeout);
    return out;
  }

private:
  void check_size(std::size_t count) const {
    if (count != size())
      throw error(errc::invalid_argument,
                  describe() + ": holds " + std::to_string(size()) + " elements, given " + std::to_string(count));
  }
};

namespace detail {
template <class T> parallel_arg to_arg(const split_array<T>& a) {
  parallel_arg arg{parallel_arg::kind::split, sizeof(T), a.size(), nullptr, nullptr, {}};
  arg.split = &a;
  return arg;
}
} // namespace detail

} // namespace ringpipe
