// The mirrored driver's spans (mirror_driver.hpp): a map kernel's batches run as its span form.

#include "mirror_driver.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace ringpipe::detail {

// A span reads no ring counter, but where the driver limits loops its items probe them
// (rp_loops_ran, stage.clh) with a loop of 1 + (capacity > 1) iterations: a cut probe runs once,
// so the input mirror's header says its capacity (at least 2) once, before any span.
void mirror_driver::write_span_header(mirror_lane& l) {
  ring_header header{};
  header.capacity = mirror_capacity_;
  header.slot_size = c_.in.slot_size();
  header.mask = mirror_capacity_ - 1;
  queue_.enqueueWriteBuffer(l.in_mirror, CL_TRUE, 0, sizeof header, &header);
}

// A span's chain: the batch up, the span form over it (whole groups, then the rest as groups of
// one item, behind the same upload), its keep flags and results down.
void mirror_driver::enqueue_span(mirror_lane& l) {
  const std::uint32_t local = c_.image.batch_local_size();
  const std::uint32_t whole = l.n - l.n % local;
  std::vector<cl::Event> uploaded(1), computed(1);
  upload_messages(l, sizeof(ring_header), &uploaded[0]);
  auto& kernel = *c_.image.span_kernel();
  const unsigned at = c_.image.span_args_at();
  kernel.setArg(1, l.in_mirror);
  kernel.setArg(2, l.out_mirror);
  kernel.setArg(at, l.keep_mirror);
  kernel.setArg(at + 1, 0u);
  kernel.setArg(at + 2, 0u);
  if (whole > 0)
    queue_.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(whole), cl::NDRange(local), &uploaded,
                                whole == l.n ? &computed[0] : nullptr);
  if (whole < l.n)
    queue_.enqueueNDRangeKernel(kernel, cl::NDRange(whole), cl::NDRange(l.n - whole), cl::NDRange(1), &uploaded,
                                &computed[0]);
  download_.enqueueReadBuffer(l.keep_mirror, CL_FALSE, 0, l.n, l.keep_staging.data(), &computed);
  download_results(l, l.out_mirror, sizeof(ring_header), l.n, &l.done);
  c_.counters.work_groups.fetch_add(whole / local + (l.n - whole), std::memory_order_relaxed);
}

// A span has returned: its kept results (moved down over dropped ones) go on in order, its input
// slots go back. It consumed the whole batch and says how it ended through its batch's words.
bool mirror_driver::complete_span(mirror_lane& l) {
  ++returned_batches_;
  const auto* keep = reinterpret_cast<const unsigned char*>(l.keep_staging.data());
  const std::size_t bytes = c_.out.slot_size();
  const bool moved = l.n > 0 && landed(l, 0) != front(l, 0); // behind a lane that dropped results
  std::uint32_t kept = l.n;
  // Usually every message is kept: one counting pass (vectorised) instead of the loop below.
  if (moved || std::count(keep, keep + l.n, 1) != l.n) {
    kept = 0;
    for (std::uint32_t i = 0; i < l.n; ++i) {
      if (keep[i] == 1) {
        if (moved || kept != i) std::memcpy(front(l, kept), landed(l, i), bytes);
        ++kept;
      } else if (keep[i] != 0) { // RP_SPAN_CUT: the messages stay queued, nothing is published
        return c_.life.after_exit(kernel_state::faulted, error_round_too_long);
      }
    }
  }
  push_results(l, kept);
  c_.in.publish_tail(l.tail + l.n);
  mirrored_in_ += l.n;
  mirrored_out_ += kept;
  c_.counters.msgs_in.store(mirrored_in_, std::memory_order_relaxed);
  c_.counters.msgs_out.store(mirrored_out_, std::memory_order_relaxed);
  if (l.ends_stream) c_.out.close();
  c_.life.published();
  if (in_flight_lanes_ == 0) c_.life.release_worker();
  const bool ended = l.ends_stream || l.stop_word != static_cast<std::uint32_t>(kernel_stop::run);
  return c_.life.after_exit(ended ? kernel_state::stopped : kernel_state::parked, 0);
}

// The mirror's slots: kernel_options::batch_capacity where given, else 1,024; for spans about 1 MiB
// of messages, since a span's launch costs about the same whatever its size, up to the part of the
// input ring that leaves the producer as much room to refill as the lanes hold: half the ring for
// one lane (CPU devices; on llvmpipe 16-byte batches of a quarter ran at two thirds of the rate),
// a quarter for two.
std::uint32_t mirror_driver::batch_capacity(const driver_context& c, bool spans, unsigned lanes) {
  constexpr std::uint32_t ring_kernel_batch = 1024;
  if (c.options.batch_capacity != 0) return c.options.batch_capacity;
  if (!spans) return ring_kernel_batch;
  const std::size_t slot = std::max(c.in.slot_size(), c.out.slot_size());
  const auto by_bytes = static_cast<std::uint32_t>(std::max<std::size_t>(1, (std::size_t{1} << 20) / slot));
  return std::max(ring_kernel_batch, std::min(by_bytes, c.in.capacity() / (2 * lanes)));
}

} // namespace ringpipe::detail
