// Combines on the calling thread. Over shared memory of CPU devices the host reads and writes the
// arrays in place, which costs far less than a kernel launch for small arrays (a launch on a CPU
// device takes tens of microseconds; a 4 KiB combine, about a microsecond). Over links through
// host memory the bytes pass through the host anyway: it combines them there, with no launch.
#include "collective_steps.hpp"
#include "host_mappings.hpp"

#include "../core/thread_name.hpp"

#include <ringpipe/occupancy.hpp>

#include <algorithm>
#include <cstring>
#include <future>
#include <optional>
#include <system_error>
#include <thread>

namespace ringpipe::detail {

bool host_reaches(const std::vector<array_bytes>& arrays, const element_op& op) {
  if (!op.on_host) return false;
  for (const auto& a : arrays)
    if (a.memory() != array_memory::shared || a.dev().info().type != device_type::cpu) return false;
  return true;
}

bool one_shared_context(const std::vector<array_bytes>& arrays) {
  for (const auto& a : arrays)
    if (a.memory() != array_memory::shared || !a.dev().shares_context_with(arrays.front().dev())) return false;
  return true;
}

namespace {

/// Waits for copies started in parallel; throws the first failure or the first late one, naming
/// its device, once every one has ended or the deadline passed.
class copy_waits {
public:
  explicit copy_waits(collective_run& run, std::string_view step) : run_(run), step_(step) {}
  /// The completion of a copy of `a`; it holds `memory` (the host side) until the copy ends, which
  /// may be after a late wait has thrown.
  copy_completion track(const array_bytes& a, std::shared_ptr<void> memory) {
    auto done = std::make_shared<std::promise<void>>();
    waits_.emplace_back(a.dev(), done->get_future());
    return [done, memory = std::move(memory)](const std::exception_ptr& e) {
      if (e)
        done->set_exception(e);
      else
        done->set_value();
    };
  }
  void wait() {
    std::exception_ptr first;
    const device* late = nullptr;
    for (auto& [dev, f] : waits_) {
      if (f.wait_until(run_.deadline()) != std::future_status::ready) {
        if (late == nullptr) late = &dev;
        continue;
      }
      try {
        f.get();
      } catch (...) {
        if (!first) first = run_.named(step_, dev, std::current_exception());
      }
    }
    waits_.clear();
    if (first) std::rethrow_exception(first);
    if (late != nullptr) run_.late(step_, late->label());
  }

private:
  collective_run& run_;
  std::string_view step_;
  std::vector<std::pair<device, std::future<void>>> waits_;
};

} // namespace

namespace {

/// Elements per chunk of a host pass: two chunks of every input are in flight at once.
constexpr std::size_t chunk_bytes = std::size_t{4} << 20;
/// Bytes of a chunk combined at a time: the tile of the result stays in the first-level cache while
/// every input is combined into it and it is copied to every output in shared memory, so memory
/// sees each byte once. Measured for an in-place all-reduce of two arrays: 0.6x a memcpy in cache
/// and 0.96x from memory with 4 KiB tiles, against 0.49x and 0.53x a pass over the whole chunk.
constexpr std::size_t tile_bytes = 4096;

/// One chunk's host memory: a copy of each input outside shared memory, and the result.
using host_memory = std::shared_ptr<std::byte[]>;
struct chunk_memory {
  std::vector<host_memory> inputs;
  host_memory result;
};
/// Host memory left uninitialised: every byte is copied in before it is read.
host_memory allocate(std::size_t bytes) { return host_memory(new std::byte[bytes]); }

/// Where a chunk's result is built. Written only to shared memory, it is copied out before the
/// next chunk is combined: the calling thread's own buffer serves both sets, kept between calls (a
/// fresh one costs page faults that take longer than a small pass). A copy to a device runs while
/// the next chunk is combined, and may outlive a failed pass: it gets memory of its own.
host_memory result_memory(std::size_t bytes, bool every_output_reached) {
  if (!every_output_reached) return allocate(bytes);
  thread_local std::vector<std::byte> kept;
  if (kept.size() < bytes) kept.resize(bytes);
  return host_memory(kept.data(), [](std::byte*) {});
}

/// Combines bytes [lo, hi) of every input into `result` and copies it to each of `copies`, a tile
/// at a time; every pointer is where byte 0 of its array (or chunk) lies.
void combine_range(const std::vector<const std::byte*>& inputs, std::byte* result,
                   const std::vector<std::byte*>& copies, std::size_t lo, std::size_t hi, std::size_t tile,
                   const element_op& op) {
  for (std::size_t t = lo; t < hi; t += tile) {
    const std::size_t bytes_here = std::min(tile, hi - t);
    if (result + t != inputs[0] + t) std::memcpy(result + t, inputs[0] + t, bytes_here);
    for (std::size_t k = 1; k < inputs.size(); ++k)
      op.on_host(result + t, inputs[k] + t, bytes_here / op.element);
    for (auto* to : copies)
      std::memcpy(to + t, result + t, bytes_here);
  }
}

/// Bytes a thread of a pass over shared memory combines at least: below that, starting a thread
/// costs more than it saves (measured: two threads gained nothing at 4 MiB, 1.4-1.7x at 16-64 MiB).
constexpr std::size_t bytes_per_thread = std::size_t{8} << 20;

/// How many threads combine `bytes` that the host reaches in place: the calling thread, and
/// more where the devices' pools have idle workers (their cores; a resident kernel holds one).
std::size_t threads_for(const std::vector<array_bytes>& inputs, std::size_t bytes) {
  std::size_t idle = bytes / bytes_per_thread;
  for (const auto& in : inputs) {
    const auto& pool = in.dev().budget();
    idle = std::min<std::size_t>(idle, pool.budget() - std::min(pool.budget(), pool.in_use()));
  }
  return std::max<std::size_t>(idle, 1);
}

/// The host reaches every input and output (shared memory, or a mapping): no chunk needs a copy,
/// so the array is split between threads (threads_for) that each combine their range in place.
void combine_in_threads(const std::vector<const std::byte*>& inputs, std::byte* result,
                        const std::vector<std::byte*>& copies, std::size_t bytes, std::size_t tile, std::size_t threads,
                        const element_op& op) {
  const std::size_t elements = bytes / op.element;
  const auto bound = [&](std::size_t t) { return elements * t / threads * op.element; };
  std::vector<std::exception_ptr> failed(threads);
  std::vector<std::thread> helpers;
  std::size_t started = 1; // ranges without a thread of their own (none could start) are the caller's
  try {
    for (; started < threads; ++started)
      helpers.emplace_back([&, t = started] {
        detail::name_this_thread("ringpipe-reduce");
        try {
          combine_range(inputs, result, copies, bound(t), bound(t + 1), tile, op);
        } catch (...) {
          failed[t] = std::current_exception();
        }
      });
  } catch (const std::system_error&) { // no thread could start: the calling thread takes the rest
  }
  try {
    combine_range(inputs, result, copies, 0, bound(1), tile, op);
    if (started < threads) combine_range(inputs, result, copies, bound(started), bound(threads), tile, op);
  } catch (...) {
    failed[0] = std::current_exception();
  }
  for (auto& h : helpers)
    h.join();
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
}

} // namespace

void host_pass(collective_run& run, std::string_view step, const std::vector<array_bytes>& inputs,
               const std::vector<array_bytes>& outputs, void* host_out, const element_op& op) {
  for (const auto& in : inputs)
    run.before(in.dev(), step);
  const std::size_t bytes = inputs.front().size_bytes();
  const std::size_t chunk = std::max(op.element, std::min(bytes, chunk_bytes) / op.element * op.element);
  const std::size_t chunks = (bytes + chunk - 1) / chunk;
  const std::size_t tile = std::max(op.element, tile_bytes / op.element * op.element);
  const auto is_shared = [](const array_bytes& a) { return a.memory() == array_memory::shared; };
  const bool all_shared =
      std::all_of(inputs.begin(), inputs.end(), is_shared) && std::all_of(outputs.begin(), outputs.end(), is_shared);
  std::optional<host_mappings> mappings; // none over shared memory alone: nothing to map
  if (!all_shared) {
    std::vector<array_bytes> arrays = inputs;
    arrays.insert(arrays.end(), outputs.begin(), outputs.end());
    mappings.emplace(run, step, arrays);
  }
  // Where the host reaches an array: its shared memory, or its mapping; null if neither.
  const auto where = [&](const array_bytes& a) -> std::byte* {
    return is_shared(a) ? static_cast<std::byte*>(a.data()) : mappings ? mappings->where(a) : nullptr;
  };
  const auto reached = [&](const array_bytes& a) { return where(a) != nullptr; };
  // The result is built in place in an output the host reaches where one may hold it: the first
  // input, or none of them (it is written before the later inputs are read). Else apart.
  std::optional<std::size_t> in_place;
  for (std::size_t k = 0; k < outputs.size() && host_out == nullptr && !in_place; ++k) {
    const auto& o = outputs[k];
    const bool later_input =
        std::any_of(inputs.begin() + 1, inputs.end(), [&](const array_bytes& i) { return o.overlaps(i); });
    if (reached(o) && !later_input && (o.same_as(inputs[0]) || !o.overlaps(inputs[0]))) in_place = k;
  }
  if (std::all_of(inputs.begin(), inputs.end(), reached) && std::all_of(outputs.begin(), outputs.end(), reached) &&
      (in_place || host_out != nullptr)) {
    std::vector<const std::byte*> from(inputs.size());
    std::transform(inputs.begin(), inputs.end(), from.begin(), [&](const array_bytes& in) { return where(in); });
    auto* result = in_place ? where(outputs[*in_place]) : static_cast<std::byte*>(host_out);
    std::vector<std::byte*> copies;
    for (const auto& o : outputs)
      if (where(o) != result) copies.push_back(where(o));
    combine_in_threads(from, result, copies, bytes, tile, threads_for(inputs, bytes), op);
    if (mappings) mappings->unmap();
    return;
  }
  const auto keep_result = in_place ? std::make_shared<array_bytes>(outputs[*in_place]) : nullptr;
  // Two sets of chunk memory: chunk c + 1 is read in while chunk c is combined and written out.
  chunk_memory memory[2];
  for (auto& m : memory) {
    for (const auto& in : inputs)
      m.inputs.push_back(reached(in) ? nullptr : allocate(chunk));
    if (host_out == nullptr && !in_place)
      m.result = result_memory(chunk, std::all_of(outputs.begin(), outputs.end(), reached));
  }
  copy_waits reads[2] = {copy_waits(run, step), copy_waits(run, step)};
  copy_waits writes[2] = {copy_waits(run, step), copy_waits(run, step)};
  const auto range = [&](std::size_t c) { return std::pair{c * chunk, std::min(chunk, bytes - c * chunk)}; };
  const auto read_in = [&](std::size_t c) {
    const auto [at_, n_] = range(c);
    const std::size_t at = at_, n = n_;
    auto& m = memory[c % 2];
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (m.inputs[k])
        inputs[k].sub_bytes(at, n).start_read(m.inputs[k].get(), reads[c % 2].track(inputs[k], m.inputs[k]));
  };
  if (chunks > 0) read_in(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    const auto [at_, n_] = range(c);
    const std::size_t at = at_, n = n_;
    auto& m = memory[c % 2];
    reads[c % 2].wait();
    if (c + 1 < chunks) {
      writes[(c + 1) % 2].wait(); // the other set's result is free again
      read_in(c + 1);
    }
    std::vector<const std::byte*> chunk_inputs;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      chunk_inputs.push_back(m.inputs[k] ? m.inputs[k].get() : where(inputs[k]) + at);
    std::byte* acc = in_place              ? where(outputs[*in_place]) + at
                     : host_out != nullptr ? static_cast<std::byte*>(host_out) + at
                                           : m.result.get();
    std::vector<std::byte*> reached_outputs; // besides the result's own place
    for (const auto& o : outputs)
      if (reached(o) && where(o) + at != acc) reached_outputs.push_back(where(o) + at);
    combine_range(chunk_inputs, acc, reached_outputs, 0, n, tile, op);
    for (const auto& o : outputs)
      if (!reached(o))
        o.sub_bytes(at, n).start_write(
            acc, writes[c % 2].track(o, in_place ? std::shared_ptr<void>(keep_result) : m.result));
  }
  writes[0].wait();
  writes[1].wait();
  if (mappings) mappings->unmap();
}

} // namespace ringpipe::detail
