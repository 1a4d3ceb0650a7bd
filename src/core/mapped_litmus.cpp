#include <ringpipe/mapped_litmus.hpp>
#include <ringpipe/opencl.hpp>
#include <ringpipe/program.hpp>

#include "thread_name.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

namespace ringpipe {

std::string_view to_string(mapped_memory m) noexcept {
  switch (m) {
  case mapped_memory::alloc_host_ptr: return "alloc_host_ptr";
  case mapped_memory::use_host_ptr: return "use_host_ptr";
  case mapped_memory::coarse_svm: return "coarse_svm";
  }
  return "?";
}

std::string_view to_string(device_fence f) noexcept {
  return f == device_fence::system_fence ? "membar.sys" : "mem_fence";
}

bool litmus_result::holds() const noexcept {
  return not_run.empty() && !device_gave_up && !host_gave_up && host_received == sent && device_received == sent &&
         device_stale + device_torn + host_stale + host_torn == 0;
}

double litmus_result::round_trip_us(double p) const {
  if (round_trip_ns.empty()) return 0;
  auto v = round_trip_ns;
  const auto k = std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

std::string litmus_result::summary() const {
  if (!not_run.empty()) return "not run: " + not_run;
  std::ostringstream o;
  o << (holds() ? "holds" : "FAILS") << ": sent " << sent << ", device read " << device_received << " (stale "
    << device_stale << ", torn " << device_torn << "), host read " << host_received << " (stale " << host_stale
    << ", torn " << host_torn << ")";
  if (device_gave_up) o << ", the kernel gave up waiting for a host write";
  if (host_gave_up) o << ", the host gave up waiting for an echo";
  if (!holds())
    o << " [the kernel read host heads up to " << device_highest_head << " in " << device_polls << " idle polls and "
      << (device_saw_stop ? "saw" : "never saw") << " the stop word; the host "
      << (host_saw_start ? "saw" : "never saw") << " the kernel's first write; the launch was "
      << launch_status_at_start << " after the host waited " << launch_wait_ms << " ms for it to run and "
      << launch_status_at_stop << " when the host stopped]";
  o.precision(3);
  o << ", " << messages_per_second() / 1e6 << " M msgs/s";
  if (!round_trip_ns.empty())
    o << ", round trip p50 " << round_trip_us(50) << " us, p99 " << round_trip_us(99) << " us";
  return o.str();
}

namespace {

constexpr std::uint32_t words_per_message = 16;
constexpr std::size_t slots_offset = 256; // words; the control lines come first
enum control : std::size_t {
  to_device_head = 0,
  to_device_tail = 16,
  to_host_head = 32,
  to_host_tail = 48,
  stop = 64,
  started = 96
};
// The kernel's own account, in a separate device buffer.
enum results : std::size_t { received, stale, torn, gave_up, done, polls, highest_head, saw_stop, result_words };

std::uint32_t message_word(std::uint32_t seq, std::uint32_t i) {
  return i == 0 ? seq : seq * 2654435761u + i * 40503u + 1u;
}

using message = std::array<std::uint32_t, words_per_message>;
message make_message(std::uint32_t seq) {
  message m;
  for (std::uint32_t i = 0; i < words_per_message; ++i)
    m[i] = message_word(seq, i);
  return m;
}

std::uint32_t load(std::uint32_t* w) { return std::atomic_ref<std::uint32_t>(*w).load(std::memory_order_acquire); }
void store(std::uint32_t* w, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(*w).store(v, std::memory_order_release);
}

/// The memory under test, mapped (or SVM) for the host while the kernel runs.
struct litmus_memory {
  cl::CommandQueue queue;
  cl::Buffer buffer;
  void* svm = nullptr;
  std::uint32_t* words = nullptr;
  std::shared_ptr<void> host_block; // use_host_ptr: the page-aligned host memory

  ~litmus_memory() {
    if (svm) clSVMFree(queue.getInfo<CL_QUEUE_CONTEXT>()(), svm);
  }
  /// After the kernel returned.
  void unmap() {
    if (!svm) queue.enqueueUnmapMemObject(buffer, words);
    queue.finish();
  }
};

std::shared_ptr<litmus_memory> make_memory(const device& dev, mapped_memory kind, std::size_t bytes) {
  auto m = std::make_shared<litmus_memory>();
  m->queue = cl::CommandQueue(dev.context(), dev.cl_device());
  const cl::Context& ctx = dev.context();
  if (kind == mapped_memory::coarse_svm) {
    m->svm = clSVMAlloc(ctx(), CL_MEM_READ_WRITE, bytes, 0);
    if (!m->svm)
      throw error(errc::out_of_memory,
                  "mapped litmus: clSVMAlloc of " + std::to_string(bytes) + " bytes failed on " + dev.label());
    m->words = static_cast<std::uint32_t*>(m->svm);
    m->queue.enqueueMapSVM(m->words, CL_TRUE, CL_MAP_WRITE, bytes);
    std::memset(m->words, 0, bytes);
    m->queue.enqueueUnmapSVM(m->words);
    m->queue.finish();
    return m;
  }
  if (kind == mapped_memory::use_host_ptr) {
    void* block = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!block) throw error(errc::out_of_memory, "mapped litmus: no host memory");
    std::memset(block, 0, bytes);
    m->host_block.reset(block, std::free);
    m->buffer = cl::Buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, block);
  } else {
    m->buffer = cl::Buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes);
  }
  m->words =
      static_cast<std::uint32_t*>(m->queue.enqueueMapBuffer(m->buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes));
  std::memset(m->words, 0, bytes);
  return m;
}

std::string not_runnable(const device& dev, const litmus_options& o) {
  if (o.memory == mapped_memory::coarse_svm && !dev.info().svm.coarse) return "the device has no buffer SVM";
  if (o.fence == device_fence::system_fence && dev.info().vendor.find("NVIDIA") == std::string::npos)
    return "membar.sys is NVIDIA PTX; the device's vendor is " + dev.info().vendor;
  if (dev.info().loops_limited)
    return "the driver ends a launch's loops after a fixed count (Mesa's llvmpipe: 65535 iterations): no kernel stays "
           "resident";
  if (o.capacity == 0 || o.messages == 0) return "no slots or no messages";
  return {};
}

// Built through the device's program cache: its build errors carry the log, and the runs of one
// fence share a program.
cl::Kernel build_litmus(const device& dev, const litmus_options& o) {
  const std::string source(*embedded_source("ringpipe/mapped_litmus.cl"));
  const std::string options = o.fence == device_fence::system_fence ? "-D RP_LITMUS_SYSTEM_FENCE" : "";
  return cl::Kernel(dev.programs().get(dev, source, options, "rp_mapped_litmus"), "rp_mapped_litmus");
}

/// Waits for the queue to drain, at most `limit`; the waiting thread keeps the memory alive.
bool finished_within(const std::shared_ptr<litmus_memory>& memory, std::chrono::milliseconds limit) {
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto s = std::make_shared<state>();
  std::thread([s, memory] {
    detail::name_this_thread("ringpipe-litmus");
    memory->queue.finish();
    std::lock_guard lock(s->mutex);
    s->done = true;
    s->cv.notify_all();
  }).detach();
  std::unique_lock lock(s->mutex);
  return s->cv.wait_for(lock, limit, [&] { return s->done; });
}

std::string status_name(cl_int status) {
  switch (status) {
  case CL_QUEUED: return "queued";
  case CL_SUBMITTED: return "submitted";
  case CL_RUNNING: return "running";
  case CL_COMPLETE: return "complete";
  }
  return "failed (" + std::string(opencl_error_name(status)) + ")";
}

cl_int status_of(const cl::Event& e) { return e.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>(); }

/// Gives the launch up to `patience` to start running, asking every millisecond (a driver may
/// defer a launch; asking without pause may also hold it up).
void wait_until_running(const cl::Event& launch, std::chrono::milliseconds patience, litmus_result& r) {
  const auto start = std::chrono::steady_clock::now();
  cl_int status = status_of(launch);
  while (status > CL_RUNNING && std::chrono::steady_clock::now() - start < patience) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    status = status_of(launch);
  }
  r.launch_status_at_start = status_name(status);
  r.launch_wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// The host's side: sends every message, reads every echo, times round trips.
void exchange(std::uint32_t* w, const cl::Event& launch, const litmus_options& o, litmus_result& r) {
  std::uint32_t* to_device = w + slots_offset;
  std::uint32_t* to_host = to_device + std::size_t{o.capacity} * words_per_message;
  std::uint32_t sent = 0, got = 0;
  const bool time_each = o.capacity == 1;
  if (time_each) r.round_trip_ns.reserve(o.messages);
  auto sent_at = std::chrono::steady_clock::now();
  auto last_progress = sent_at;
  const auto start = sent_at;
  bool kernel_returned = false;
  auto last_status_check = start;
  while (got < o.messages) {
    bool progress = false;
    // Echoes first: with one slot the echo of a message and the room for the next come together,
    // and the round trip is timed from the send before it.
    const std::uint32_t head = load(w + to_host_head);
    if (head != got) {
      const auto now = std::chrono::steady_clock::now();
      for (; got != head; ++got) {
        message m;
        std::memcpy(m.data(), to_host + std::size_t{got % o.capacity} * words_per_message, sizeof(m));
        if (m == make_message(got)) continue;
        ++(m == make_message(got - o.capacity) ? r.host_stale : r.host_torn);
      }
      store(w + to_host_tail, got);
      if (time_each) r.round_trip_ns.push_back(static_cast<std::uint32_t>((now - sent_at).count()));
      progress = true;
    }
    const std::uint32_t free_from = load(w + to_device_tail);
    if (sent < o.messages && sent - free_from < o.capacity) {
      for (; sent < o.messages && sent - free_from < o.capacity; ++sent) {
        const auto m = make_message(sent);
        std::memcpy(to_device + std::size_t{sent % o.capacity} * words_per_message, m.data(), sizeof(m));
      }
      store(w + to_device_head, sent);
      sent_at = std::chrono::steady_clock::now();
      progress = true;
    }
    const auto now = std::chrono::steady_clock::now();
    r.host_saw_start = r.host_saw_start || load(w + started) != 0;
    if (progress) {
      last_progress = now;
    } else if (now - last_progress > o.patience) {
      r.host_gave_up = true;
      break;
    } else if (now - last_status_check > std::chrono::milliseconds(1)) {
      last_status_check = now;
      if (status_of(launch) != CL_COMPLETE) continue;
      if (kernel_returned) break; // it ended early: one more look at its heads came first
      kernel_returned = true;
    }
  }
  r.launch_status_at_stop = status_name(status_of(launch));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.sent = sent;
  r.host_received = got;
}

} // namespace

litmus_result run_mapped_litmus(const device& dev, const litmus_options& o) {
  litmus_result r;
  r.not_run = not_runnable(dev, o);
  if (!r.not_run.empty()) return r;
  auto kernel = build_litmus(dev, o);
  const std::size_t bytes = (slots_offset + 2 * std::size_t{o.capacity} * words_per_message) * sizeof(std::uint32_t);
  auto memory = make_memory(dev, o.memory, bytes);
  cl::Buffer results_buffer(dev.context(), CL_MEM_READ_WRITE, result_words * sizeof(std::uint32_t));
  memory->queue.enqueueFillBuffer(results_buffer, std::uint32_t{0}, 0, result_words * sizeof(std::uint32_t));
  if (memory->svm)
    clSetKernelArgSVMPointer(kernel(), 0, memory->svm);
  else
    kernel.setArg(0, memory->buffer);
  kernel.setArg(1, o.messages);
  kernel.setArg(2, o.capacity);
  const std::uint32_t patience = o.device_patience != 0                ? o.device_patience
                                 : dev.info().type == device_type::cpu ? 1u << 30
                                                                       : 1u << 24;
  kernel.setArg(3, patience);
  kernel.setArg(4, o.tear_every);
  kernel.setArg(5, results_buffer);
  cl::Event launch;
  memory->queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(1), cl::NDRange(1), nullptr, &launch);
  memory->queue.flush();
  wait_until_running(launch, o.patience, r);
  exchange(memory->words, launch, o, r);
  store(memory->words + stop, 1);
  const auto limit = o.patience + std::chrono::seconds(30);
  if (!finished_within(memory, limit))
    throw error(errc::timeout, "mapped litmus (" + std::string(to_string(o.memory)) + ") on " + dev.label() +
                                   ": the kernel still runs " + std::to_string(limit.count()) +
                                   " ms after the host stopped; its memory is left mapped");
  memory->unmap();
  std::array<std::uint32_t, result_words> w{};
  memory->queue.enqueueReadBuffer(results_buffer, CL_TRUE, 0, sizeof(w), w.data());
  if (w[done] != 1)
    throw error(errc::kernel_fault, "mapped litmus on " + dev.label() + ": the kernel returned without its results");
  r.device_received = w[received];
  r.device_stale = w[stale];
  r.device_torn = w[torn];
  r.device_gave_up = w[gave_up] != 0;
  r.device_polls = w[polls];
  r.device_highest_head = w[highest_head];
  r.device_saw_stop = w[saw_stop] != 0;
  return r;
}

} // namespace ringpipe
