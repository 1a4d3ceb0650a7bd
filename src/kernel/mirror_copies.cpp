// Where the mirrored driver's batches cross between host and device (mirror_driver.hpp): through
// a lane's pinned staging (a GPU copies it by DMA), or on a CPU device straight from the input
// ring's slots and into the output ring's free slots, in at most two runs each (a batch may wrap
// round a ring). The input slots stay the batch's until it completes, and the output slots past
// the head are the driver's alone (it is the ring's one producer), so nothing else touches them.

#include "mirror_driver.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace ringpipe::detail {
namespace {

// Calls run(counter, offset, count) for the one or two pieces of ring counters [from, from + n)
// that lie contiguous in the slot array; offset counts slots from `from`.
template <class Run> void for_each_run(const ring_buffer& ring, std::uint32_t from, std::uint32_t n, Run&& run) {
  const std::uint32_t first = std::min(n, ring.capacity() - (from & (ring.capacity() - 1)));
  if (first > 0) run(from, 0u, first, first == n);
  if (first < n) run(from + first, first, n - first, true);
}

} // namespace

// The batch's n messages into `mirror` at byte `at`; `done` is the last copy's event.
void mirror_driver::upload_messages(mirror_lane& l, std::size_t at, cl::Event* done) {
  const std::size_t bytes = c_.in.slot_size();
  if (!ring_copies_) {
    upload_.enqueueWriteBuffer(l.in_mirror, CL_FALSE, at, l.n * bytes, l.in_staging.data(), nullptr, done);
    return;
  }
  for_each_run(c_.in, l.tail, l.n, [&](std::uint32_t counter, std::uint32_t offset, std::uint32_t count, bool last) {
    upload_.enqueueWriteBuffer(l.in_mirror, CL_FALSE, at + offset * bytes, count * bytes, c_.in.slot(counter), nullptr,
                               last ? done : nullptr);
  });
}

// `count` results from `mirror` at byte `at`; `done` is the last copy's event.
void mirror_driver::download_results(mirror_lane& l, const cl::Buffer& mirror, std::size_t at, std::uint32_t count,
                                     cl::Event* done) {
  const std::size_t bytes = c_.out.slot_size();
  if (!ring_copies_) {
    download_.enqueueReadBuffer(mirror, CL_FALSE, at, count * bytes, l.out_staging.data(), nullptr, done);
    return;
  }
  for_each_run(c_.out, l.out_at, count, [&](std::uint32_t counter, std::uint32_t offset, std::uint32_t n, bool last) {
    download_.enqueueReadBuffer(mirror, CL_FALSE, at + offset * bytes, n * bytes, c_.out.slot(counter), nullptr,
                                last ? done : nullptr);
  });
}

// Where the lane's result i landed.
std::byte* mirror_driver::landed(const mirror_lane& l, std::uint32_t i) const noexcept {
  return ring_copies_ ? c_.out.slot(l.out_at + i) : l.out_staging.data() + std::size_t{i} * c_.out.slot_size();
}

// Where the k-th result to publish goes: the staging's front, or the ring's slot k past its head
// (a lane behind one that dropped results landed further on; results only ever move down).
std::byte* mirror_driver::front(const mirror_lane& l, std::uint32_t k) const noexcept {
  return ring_copies_ ? c_.out.slot(c_.out.load_head(std::memory_order_relaxed) + k)
                      : l.out_staging.data() + std::size_t{k} * c_.out.slot_size();
}

// Publishes the `count` results gathered at the front.
void mirror_driver::push_results(const mirror_lane& l, std::uint32_t count) {
  if (count == 0) return;
  if (ring_copies_) {
    c_.out.commit_push(count);
    return;
  }
  if (c_.out.push_n_bytes(l.out_staging.data(), count) != count)
    throw error(errc::kernel_fault, "output ring lost room during a batch");
}

} // namespace ringpipe::detail
