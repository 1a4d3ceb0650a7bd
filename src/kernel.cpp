#include <ringpipe/kernel.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/runtime.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

namespace ringpipe {

std::string_view to_string(kernel_state s) noexcept {
  switch (s) {
  case kernel_state::idle: return "idle";
  case kernel_state::launched: return "launched";
  case kernel_state::running: return "running";
  case kernel_state::parked: return "parked";
  case kernel_state::stopped: return "stopped";
  case kernel_state::faulted: return "faulted";
  }
  return "?";
}

namespace detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t max_group = 256; // RINGPIPE_MAX_GROUP in cl/ringpipe/stage.clh
// Empty polls before a parked kernel leaves while other kernels wait for its worker.
constexpr std::uint32_t contended_idle_budget = 64;

std::string ms(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// What a kernel declared with RP_DECLARE_KERNEL (stage.clh): its message sizes and kind.
struct declaration {
  std::size_t in_bytes = 0;
  std::size_t out_bytes = 0;
  bool map = false; // consumes whole batches, at most one result per message, no state
};
constexpr unsigned long kind_map = 1; // RP_KIND_MAP

// Reads the declaration (each value plus one) from the companion kernel's work_group_size_hint.
std::optional<declaration> declaration_from_attributes(const cl::Kernel& sizes) {
  std::string attributes;
  try {
    attributes = sizes.getInfo<CL_KERNEL_ATTRIBUTES>();
  } catch (const cl::Error&) {
    return std::nullopt;
  }
  const auto pos = attributes.find("work_group_size_hint(");
  unsigned long in = 0, out = 0, kind = 0;
  if (pos == std::string::npos ||
      std::sscanf(attributes.c_str() + pos, "work_group_size_hint(%lu ,%lu ,%lu", &in, &out, &kind) != 3 || in == 0 ||
      out == 0 || kind == 0)
    return std::nullopt;
  return declaration{in - 1, out - 1, kind - 1 == kind_map};
}

// Where attributes are not reported (oclgrind returns none that parse), runs the companion kernel
// once: it writes the declaration. It is one work-item and never waits, so it cannot starve for
// long; still, it gets a deadline.
declaration declaration_from_launch(const device& dev, cl::Kernel& sizes, const std::string& name) {
  return cl_call(("reading the message sizes of kernel '" + name + "'").c_str(), [&] {
    cl::CommandQueue queue(dev.context(), dev.cl_device());
    cl::Buffer result(dev.context(), CL_MEM_READ_WRITE, 3 * sizeof(cl_uint));
    sizes.setArg(0, result);
    cl::Event ran;
    queue.enqueueNDRangeKernel(sizes, cl::NullRange, cl::NDRange(1), cl::NDRange(1), nullptr, &ran);
    queue.flush();
    const bool finished = ring_buffer::wait_until(
        [&] { return ran.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>() <= CL_COMPLETE; }, std::chrono::seconds(10));
    if (!finished) {
      throw error(errc::timeout, "kernel '" + name + "': the launch that reads its declared message sizes on device '" +
                                     dev.name() + "' did not finish within 10 s");
    }
    cl_uint values[3] = {0, 0, 0};
    queue.enqueueReadBuffer(result, CL_TRUE, 0, sizeof(values), values);
    return declaration{values[0], values[1], values[2] == kind_map};
  });
}

// What kernel `name` declared, or nothing if it declared nothing.
std::optional<declaration> declared(const device& dev, const cl::Program& program, const std::string& name) {
  cl_int status = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program(), (name + "__ringpipe_sizes").c_str(), &status);
  if (status != CL_SUCCESS) return std::nullopt;
  cl::Kernel sizes(k);
  if (auto found = declaration_from_attributes(sizes)) return found;
  return declaration_from_launch(dev, sizes, name);
}

std::string describe_size(std::size_t bytes) {
  return bytes == 0 ? "no ring" : std::to_string(bytes) + "-byte messages";
}

} // namespace

struct kernel_proxy : std::enable_shared_from_this<kernel_proxy> {
  struct lane; // one batch in flight on a device without shared memory

  kernel_proxy(runtime& rt, const device& d, kernel_spec s, std::size_t in_b, std::size_t out_b, kernel_options o)
      : dev(d), spec(std::move(s)), options(o), in_bytes(in_b), out_bytes(out_b),
        strand(boost::asio::make_strand(rt.executor())), timer(strand) {
    std::string build_options = base_build_options(dev);
    if (!spec.build_options.empty()) build_options += " " + spec.build_options;
    program = dev.programs().get(dev, resolve_includes(spec.source), build_options, spec.name);
    const auto sizes = declared(dev, program, spec.name);
    if (!sizes) {
      throw error(errc::message_size, "kernel '" + spec.name +
                                          "' declares no message sizes: define it with RINGPIPE_MAP_KERNEL or "
                                          "RINGPIPE_DECLARE_SIZES");
    }
    if (sizes->in_bytes != in_bytes || sizes->out_bytes != out_bytes) {
      throw error(errc::message_size, "kernel '" + spec.name + "' was declared for " + describe_size(sizes->in_bytes) +
                                          " in and " + describe_size(sizes->out_bytes) +
                                          " out, but the host type gives " + describe_size(in_bytes) + " in and " +
                                          describe_size(out_bytes) + " out");
    }
    map_kernel = sizes->map;
    kernel =
        cl_call(("clCreateKernel '" + spec.name + "'").c_str(), [&] { return cl::Kernel(program, spec.name.c_str()); });
    queue = cl_call("clCreateCommandQueue", [&] { return cl::CommandQueue(dev.context(), dev.cl_device()); });
    const auto kernel_max = kernel.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev.cl_device());
    const auto limit =
        static_cast<std::uint32_t>(std::min<std::size_t>({kernel_max, dev.info().max_work_group_size, max_group}));
    // A kernel that fixes its group size (raw kernels: reqd_work_group_size(1, 1, 1)) gets it.
    const auto required = kernel.getWorkGroupInfo<CL_KERNEL_COMPILE_WORK_GROUP_SIZE>(dev.cl_device())[0];
    if (required != 0 && options.local_size != 0 && options.local_size != required) {
      throw error(errc::invalid_argument, "kernel '" + spec.name + "' requires a group of " + std::to_string(required) +
                                              " work-items, not " + std::to_string(options.local_size));
    }
    local_size = required != 0             ? static_cast<std::uint32_t>(required)
                 : options.local_size == 0 ? std::min<std::uint32_t>(64, limit)
                                           : options.local_size;
    if (spec.state_bytes > 0) {
      cl_call("allocating kernel state", [&] {
        state = cl::Buffer(dev.context(), CL_MEM_READ_WRITE, spec.state_bytes);
        const std::vector<std::byte> zeros(spec.state_bytes);
        queue.enqueueWriteBuffer(state, CL_TRUE, 0, spec.state_bytes, zeros.data());
        kernel.setArg(3, state);
        return 0;
      });
    }
    for (std::size_t i = 0; i < spec.args.size(); ++i)
      set_arg(static_cast<unsigned>(i), spec.args[i].bytes.data(), spec.args[i].bytes.size());
    if (local_size > limit) {
      throw error(errc::invalid_argument, "kernel '" + spec.name + "': local size " + std::to_string(local_size) +
                                              " exceeds the limit of " + std::to_string(limit) + " on device '" +
                                              dev.name() + "'");
    }
  }

  void set_arg(unsigned index, const void* value, std::size_t size) {
    const unsigned at = 3 + (spec.state_bytes > 0 ? 1 : 0) + index;
    if (const cl_int s = clSetKernelArg(kernel(), at, size, value); s != CL_SUCCESS)
      throw_opencl_error(s, ("clSetKernelArg " + std::to_string(index) + " of kernel '" + spec.name + "'").c_str());
  }

  ~kernel_proxy() { release_device_objects(); }

  // Releases every OpenCL object the kernel holds. The handle does this on the strand once the
  // kernel has exited, so they are gone when its destructor returns rather than whenever a late
  // handler lets go of the proxy, on whichever runtime thread that is.
  void release_device_objects() noexcept {
    if (lanes[0].in_mirror() != nullptr) {
      // A lane's commands may still read or write its staging memory until they complete.
      clFinish(upload());
      clFinish(queue());
      clFinish(download());
      for (auto& l : lanes) {
        unmap(l.in_staging);
        unmap(l.out_staging);
      }
      clFinish(queue());
    }
    if (ctl_svm != nullptr) clSVMFree(dev.context()(), ctl_svm);
    ctl_svm = nullptr;
    lanes = {};
    running = cl::Event();
    ctl_buffer = cl::Buffer();
    state = cl::Buffer();
    upload = cl::CommandQueue();
    download = cl::CommandQueue();
    queue = cl::CommandQueue();
    kernel = cl::Kernel();
    program = cl::Program();
    in.reset(); // rings the kernel was the last to hold (SVM or device memory)
    out.reset();
    has_input = has_output = false;
  }

  // ---- set-up (caller's thread) ----
  void start(std::shared_ptr<ring_buffer> input, std::shared_ptr<ring_buffer> output) {
    if (started) throw error(errc::invalid_argument, "kernel '" + spec.name + "' was already started");
    check_ring(input, in_bytes, "input");
    check_ring(output, out_bytes, "output");
    has_input = input != nullptr;
    has_output = output != nullptr;
    const auto& info = dev.info();
    const bool rings_shared = [&] {
      for (const auto& r : {input, output})
        if (r && (r->memory() != ring_memory::svm || r->svm_context() != dev.context()())) return false;
      return true;
    }();
    shared_memory = rings_shared && info.svm.fine_buffer && info.svm.atomics;

    // Rings for absent sides: closed and empty, in the same kind of memory.
    if (!input) {
      input = shared_memory ? std::make_shared<ring_buffer>(dev, 1, 4, ring_options{spec.name + ".no-input"})
                            : std::make_shared<ring_buffer>(1, 4, ring_options{spec.name + ".no-input"});
      input->close();
    }
    if (!output) {
      output = shared_memory ? std::make_shared<ring_buffer>(dev, 1, 4, ring_options{spec.name + ".no-output"})
                             : std::make_shared<ring_buffer>(1, 4, ring_options{spec.name + ".no-output"});
    }
    in = std::move(input);
    out = std::move(output);

    if (options.mode) {
      chosen_mode = *options.mode;
      if (!info.supports(chosen_mode)) {
        throw error(errc::unsupported_mode,
                    "kernel '" + spec.name + "' cannot run " + std::string(to_string(chosen_mode)) + " on device '" +
                        dev.name() +
                        "': that needs fine-grained buffer SVM with SVM atomics and acquire/release "
                        "atomics (device has fine_buffer=" +
                        (info.svm.fine_buffer ? "yes" : "no") + ", svm atomics=" + (info.svm.atomics ? "yes" : "no") +
                        ", c11 atomics=" + (info.c11_atomics ? "yes" : "no") + "); batched mode runs everywhere");
      }
      if (chosen_mode != kernel_mode::batched && !shared_memory) {
        throw error(errc::unsupported_mode,
                    "kernel '" + spec.name + "' cannot run " + std::string(to_string(chosen_mode)) +
                        ": its rings are not in this device's SVM (create them with the device)");
      }
    } else if (shared_memory && info.supports(kernel_mode::persistent) && dev.budget().persistent_available()) {
      chosen_mode = kernel_mode::persistent;
    } else if (shared_memory && info.supports(kernel_mode::parked)) {
      chosen_mode = kernel_mode::parked;
    } else {
      chosen_mode = kernel_mode::batched;
    }

    const std::uint32_t budget = chosen_mode == kernel_mode::persistent ? 0
                                 : chosen_mode == kernel_mode::parked   ? std::max(1u, options.idle_budget)
                                                                        : 1u;
    if (shared_memory) {
      ctl_svm = static_cast<control_block*>(
          clSVMAlloc(dev.context()(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS,
                     sizeof(control_block), 64));
      if (ctl_svm == nullptr)
        throw error(std::make_error_code(std::errc::not_enough_memory), "clSVMAlloc of a control block failed");
      std::memset(static_cast<void*>(ctl_svm), 0, sizeof(control_block));
      ctl_svm->idle_budget = budget;
      idle_budget_now = budget;
      cl_call("clSetKernelArgSVMPointer", [&] {
        for (cl_uint i = 0; i < 3; ++i) {
          void* p = i == 0 ? static_cast<void*>(ctl_svm) : i == 1 ? static_cast<void*>(in->header()) : out->header();
          if (const cl_int s = clSetKernelArgSVMPointer(kernel(), i, p); s != CL_SUCCESS) throw cl::Error(s);
        }
        return 0;
      });
    } else {
      mirror_capacity = 1;
      while (mirror_capacity < options.batch_capacity)
        mirror_capacity <<= 1;
      // Two lanes only for map kernels: they consume whole batches, so the next batch's window
      // is known before the current one returns (see RP_KIND_MAP in stage.clh).
      const std::uint32_t lanes_wanted = options.staging_lanes != 0      ? options.staging_lanes
                                         : info.type == device_type::cpu ? 1
                                                                         : 2;
      lane_count = map_kernel && has_input && has_output && lanes_wanted >= 2 ? 2 : 1;
      cl_call("clCreateBuffer (batch mirrors)", [&] {
        // Copies get queues of their own only where they can overlap a running batch.
        upload = lane_count > 1 ? cl::CommandQueue(dev.context(), dev.cl_device()) : queue;
        download = lane_count > 1 ? cl::CommandQueue(dev.context(), dev.cl_device()) : queue;
        ctl_buffer = cl::Buffer(dev.context(), CL_MEM_READ_WRITE, sizeof(control_block));
        control_block initial{};
        initial.idle_budget = budget;
        queue.enqueueWriteBuffer(ctl_buffer, CL_TRUE, 0, sizeof(control_block), &initial);
        kernel.setArg(0, ctl_buffer);
        for (unsigned i = 0; i < lane_count; ++i) {
          auto& l = lanes[i];
          l.in_mirror = cl::Buffer(dev.context(), CL_MEM_READ_WRITE,
                                   sizeof(ring_header) + std::size_t{mirror_capacity} * in->slot_size());
          l.out_mirror = cl::Buffer(dev.context(), CL_MEM_READ_WRITE,
                                    sizeof(ring_header) + std::size_t{mirror_capacity} * out->slot_size());
          // Batches cross between host and device through pinned (driver-allocated, mapped) host
          // memory, which devices copy by DMA; on CPU devices it is ordinary memory.
          l.in_staging = pinned_staging(std::size_t{mirror_capacity} * in->slot_size());
          l.out_staging = pinned_staging(std::size_t{mirror_capacity} * out->slot_size());
        }
        return 0;
      });
    }
    // A kernel that could never get a worker is refused here, in the caller's thread.
    if (dev.info().persistent_budget > 0) first_slot = dev.budget().try_acquire(chosen_mode, spec.name);
    started = true;
    heartbeat_stamp = clock::now();
    boost::asio::post(strand, [self = shared_from_this()] { self->tick(); });
  }

  void check_ring(const std::shared_ptr<ring_buffer>& r, std::size_t bytes, const char* side) const {
    if (!r && bytes != 0) {
      throw error(errc::invalid_argument, "kernel '" + spec.name + "' needs an " + side + " ring of " +
                                              std::to_string(bytes) + "-byte messages");
    }
    if (r && r->slot_size() != bytes) {
      throw error(errc::message_size, "kernel '" + spec.name + "' " + side + " ring '" + r->name() + "' has " +
                                          std::to_string(r->slot_size()) +
                                          "-byte slots but the kernel was declared for " + describe_size(bytes));
    }
  }

  // ---- the proxy's loop (strand) ----
  void tick() {
    if (finished_flag.load(std::memory_order_acquire)) return;
    if (reaping) return reap();
    bool progress = false;
    try {
      progress = shared_memory ? tick_shared() : tick_mirrored();
    } catch (const std::exception& e) {
      fail(std::make_exception_ptr(
          error(errc::kernel_fault, "kernel '" + spec.name + "' on device '" + dev.name() + "' failed: " + e.what())));
      return;
    }
    if (finished_flag.load(std::memory_order_acquire)) return;
    schedule(progress);
  }

  void schedule(bool progress) {
    if (progress) {
      idle_delay = std::chrono::microseconds(20);
      boost::asio::post(strand, [self = shared_from_this()] { self->tick(); });
      return;
    }
    // Idle: back off to a ceiling that keeps an idle pipeline cheap but still watches heartbeats.
    const auto ceiling =
        chosen_mode == kernel_mode::persistent ? std::chrono::microseconds(20000) : std::chrono::microseconds(1000);
    idle_delay = std::min(idle_delay * 2, ceiling);
    timer.expires_after(idle_delay);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->tick();
    });
  }

  std::uint32_t load_ctl(const std::uint32_t& field) const {
    return std::atomic_ref(const_cast<std::uint32_t&>(field)).load(std::memory_order_acquire);
  }
  void store_ctl(std::uint32_t& field, std::uint32_t v) { std::atomic_ref(field).store(v, std::memory_order_release); }

  bool has_work() {
    const bool input_ready = !has_input || in->size() > 0;
    const bool output_room = !has_output || out->space() > 0;
    return input_ready && output_room;
  }
  // The kernel ended its stream: closed its output, or (a sink) consumed its input to the end.
  bool stream_ended() { return has_output ? out->closed() : !has_input || in->drained(); }
  // The input ended but the kernel has not yet seen it (it must close its output or flush).
  bool end_pending() { return has_input && in->drained(); }

  bool tick_shared() {
    if (in_flight) {
      observe_counters();
      const auto status = running.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
      if (status < 0) throw_opencl_error(status, "kernel execution");
      if (status != CL_COMPLETE) {
        watch_heartbeat();
        yield_when_contended();
        return false;
      }
      in_flight = false;
      slot.release();
      return after_exit(static_cast<kernel_state>(load_ctl(ctl_svm->state)), load_ctl(ctl_svm->error));
    }
    const auto stop = stop_request.load(std::memory_order_acquire);
    if (stop == kernel_stop::now) return finish(kernel_state::stopped);
    const bool work = has_work() || end_pending();
    if (chosen_mode != kernel_mode::persistent && !work) {
      if (stop == kernel_stop::drain && (!has_input || in->size() == 0)) return finish(kernel_state::stopped);
      return false;
    }
    return launch();
  }

  bool launch() {
    if (!acquire_worker()) return false;
    const auto stop = stop_request.load(std::memory_order_acquire);
    if (shared_memory) {
      store_ctl(ctl_svm->state, static_cast<std::uint32_t>(kernel_state::launched));
      store_ctl(ctl_svm->stop, static_cast<std::uint32_t>(stop));
    }
    cl_call("clEnqueueNDRangeKernel", [&] {
      queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(local_size), cl::NDRange(local_size), nullptr,
                                 &running);
      queue.flush();
      return 0;
    });
    in_flight = true;
    launches.fetch_add(1, std::memory_order_relaxed);
    heartbeat_stamp = clock::now();
    return true;
  }

  // A launch returned with the kernel's final state for it.
  bool after_exit(kernel_state state, std::uint32_t code) {
    if (shared_memory) observe_counters();
    switch (state) {
    case kernel_state::faulted:
      fail(std::make_exception_ptr(error(errc::kernel_fault, "kernel '" + spec.name + "' on device '" + dev.name() +
                                                                 "' reported error code " + std::to_string(code))));
      return false;
    case kernel_state::stopped:
      if (stop_request.load(std::memory_order_acquire) == kernel_stop::run && !stream_ended()) {
        // Nobody asked it to stop and it did not end its stream: whatever waits on it would hang.
        fail(std::make_exception_ptr(
            error(errc::kernel_fault, "kernel '" + spec.name + "' on device '" + dev.name() +
                                          "' stopped on its own before its stream ended (" +
                                          (has_output ? "output ring '" + out->name() + "' not closed"
                                                      : "input ring '" + in->name() + "' not drained") +
                                          ")")));
        return false;
      }
      return finish(kernel_state::stopped);
    case kernel_state::parked: public_state.store(kernel_state::parked); return true;
    default:
      fail(std::make_exception_ptr(
          error(errc::kernel_fault, "kernel '" + spec.name + "' returned in state " + std::string(to_string(state)))));
      return false;
    }
  }

  // Batched through device buffers: copy a batch in, run the kernel over it, copy the results
  // out. Each batch is enqueued as one chain over three queues (upload, compute, download) and
  // the proxy polls its completion, so a runtime thread never blocks on the device and a batch
  // that does not return is reported as stalled. Map kernels have two lanes: the next batch is
  // uploaded while the current one runs, and its results are downloaded while the next runs.
  // Lanes complete strictly in the order they were launched.
  bool tick_mirrored() {
    bool progress = false;
    if (in_flight_lanes > 0) {
      lane& oldest = lanes[front];
      const auto status = oldest.done.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>();
      if (status < 0) throw_opencl_error(status, "batched launch");
      if (status != CL_COMPLETE) {
        if (watch_batch(oldest)) return false;
        return in_flight_lanes < lane_count && launch_batch();
      }
      front = (front + 1) % lane_count;
      in_flight = --in_flight_lanes > 0;
      heartbeat_stamp = clock::now();
      progress = complete_batch(oldest);
      if (finished_flag.load(std::memory_order_acquire) || reaping) return false;
    }
    while (in_flight_lanes < lane_count && launch_batch())
      progress = true;
    return progress;
  }

  // Launches a batch into the next free lane, behind the lanes in flight; false if there is
  // nothing to launch (or the proxy finished).
  bool launch_batch() {
    const auto stop = stop_request.load(std::memory_order_acquire);
    std::uint32_t ahead = 0; // messages (and result room) claimed by the lane in flight
    if (in_flight_lanes > 0) {
      // Behind a batch only when that batch will consume everything it holds and go on.
      const lane& last = lanes[(front + in_flight_lanes - 1) % lane_count];
      if (stop != kernel_stop::run || last.ends_stream || last.stop_word != 0) return false;
      ahead = last.n;
    } else if (stop == kernel_stop::now) {
      return finish(kernel_state::stopped);
    }
    const bool end = in_flight_lanes == 0 && end_pending();
    const std::uint32_t queued = has_input ? in->size() - ahead : 0;
    // A second lane for a full half mirror or the stream's last messages only: a trickle waits
    // for the running batch, which keeps batches large (each launch has a fixed cost).
    if (in_flight_lanes > 0 && queued < mirror_capacity / 2 && !in->closed()) return false;
    std::uint32_t n = has_input ? std::min(queued, mirror_capacity) : mirror_capacity;
    if (has_output) n = std::min(n, out->space() - ahead);
    if (n == 0 && !end) {
      if (in_flight_lanes == 0 && stop == kernel_stop::drain && queued == 0) return finish(kernel_state::stopped);
      return false;
    }
    if (!acquire_worker()) return false;
    lane& l = lanes[(front + in_flight_lanes) % lane_count];
    const std::uint32_t in_size = in->slot_size();
    const std::uint32_t out_size = out->slot_size();
    l.n = n;
    l.tail = in->load_tail(std::memory_order_relaxed) + ahead;
    l.ends_stream = end || (has_input && in->closed() && n == queued);

    auto& in_header = l.in_header;
    in_header = {};
    in_header.head = has_input ? n : 0;
    in_header.capacity = mirror_capacity;
    in_header.slot_size = in_size;
    in_header.mask = mirror_capacity - 1;
    in_header.flags = (l.ends_stream || !has_input) ? ring_closed : 0;
    auto& out_header = l.out_header;
    out_header = {};
    out_header.capacity = has_output ? mirror_capacity : 1;
    out_header.slot_size = out_size;
    out_header.mask = out_header.capacity - 1;
    // Room for exactly the n results the host ring can take: the mirror looks full but for its
    // last n slots, so the results land there contiguously.
    const std::uint32_t room = has_output ? n : out_header.capacity;
    out_header.head = out_header.capacity - room;
    l.out_start = out_header.head;
    // The mirror holds only this batch: a drain request applies once the batch is all that is left.
    const bool batch_is_everything = !has_input || n == queued;
    l.stop_word =
        static_cast<std::uint32_t>(stop == kernel_stop::drain && !batch_is_everything ? kernel_stop::run : stop);
    l.state_word = static_cast<std::uint32_t>(kernel_state::launched);

    if (has_input && n > 0) { // at most two runs: up to the end of the slot array, then from its start
      const std::uint32_t first = std::min(n, in->capacity() - (l.tail & (in->capacity() - 1)));
      std::memcpy(l.in_staging.data, in->slot(l.tail), std::size_t{first} * in_size);
      std::memcpy(l.in_staging.data + std::size_t{first} * in_size, in->slot(l.tail + first),
                  std::size_t{n - first} * in_size);
    }

    cl_call("batched launch", [&] {
      std::vector<cl::Event> uploaded(1), computed(1);
      upload.enqueueWriteBuffer(l.in_mirror, CL_FALSE, 0, sizeof(ring_header), &in_header);
      if (has_input && n > 0)
        upload.enqueueWriteBuffer(l.in_mirror, CL_FALSE, sizeof(ring_header), std::size_t{n} * in_size,
                                  l.in_staging.data);
      upload.enqueueWriteBuffer(l.out_mirror, CL_FALSE, 0, sizeof(ring_header), &out_header, nullptr, &uploaded[0]);
      // Only the host's words of the control block: the counters are the kernel's, and a lane
      // queued behind another must not overwrite what the earlier launch writes.
      queue.enqueueWriteBuffer(ctl_buffer, CL_FALSE, offsetof(control_block, stop), sizeof(l.stop_word), &l.stop_word);
      queue.enqueueWriteBuffer(ctl_buffer, CL_FALSE, offsetof(control_block, state), sizeof(l.state_word),
                               &l.state_word);
      kernel.setArg(1, l.in_mirror);
      kernel.setArg(2, l.out_mirror);
      queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(local_size), cl::NDRange(local_size), &uploaded);
      queue.enqueueReadBuffer(ctl_buffer, CL_FALSE, 0, sizeof(control_block), &l.ctl, nullptr, &computed[0]);
      download.enqueueReadBuffer(l.in_mirror, CL_FALSE, 0, sizeof(ring_header), &in_header, &computed);
      if (has_output && n > 0)
        download.enqueueReadBuffer(l.out_mirror, CL_FALSE, sizeof(ring_header) + std::size_t{l.out_start} * out_size,
                                   std::size_t{n} * out_size, l.out_staging.data);
      download.enqueueReadBuffer(l.out_mirror, CL_FALSE, 0, sizeof(ring_header), &out_header, nullptr, &l.done);
      upload.flush();
      queue.flush();
      download.flush();
      return 0;
    });
    if (in_flight_lanes == 0)
      heartbeat_stamp = clock::now();
    else
      overlapped.fetch_add(1, std::memory_order_relaxed);
    ++in_flight_lanes;
    in_flight = true;
    running = l.done; // the last lane's chain completes last
    launches.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // A lane's chain has completed: hand its results on and return its input slots.
  bool complete_batch(lane& l) {
    const std::uint32_t produced = l.out_header.head - l.out_start;
    if (produced > l.n) throw error(errc::kernel_fault, "produced more results than the batch had room for");
    if (has_output && produced > 0) {
      const auto pushed = out->push_n_bytes(l.out_staging.data, produced);
      if (pushed != produced) throw error(errc::kernel_fault, "output ring lost room during a batch");
    }
    const std::uint32_t consumed = l.in_header.tail;
    if (has_input && consumed > 0) in->publish_tail(l.tail + consumed);
    mirrored_in += consumed;
    mirrored_out += produced;
    msgs_in.store(mirrored_in, std::memory_order_relaxed);
    msgs_out.store(mirrored_out, std::memory_order_relaxed);
    if (l.out_header.flags & ring_closed && has_output) out->close();
    const auto exit_state = static_cast<kernel_state>(l.ctl.state);
    if (in_flight_lanes > 0 && consumed < l.n && exit_state != kernel_state::faulted) {
      // The next lane's window started after this batch: its results would come out of order.
      throw error(errc::kernel_fault, "consumed " + std::to_string(consumed) + " of its batch of " +
                                          std::to_string(l.n) +
                                          " while the next batch was queued (a map kernel consumes every message)");
    }
    if (in_flight_lanes == 0) slot.release();
    return after_exit(exit_state, l.ctl.error) || consumed > 0;
  }

  // The oldest lane has not returned within the stall timeout: true if that is reported. The
  // kernel cannot be told to stop (its control block is a device buffer), so it is reaped when it
  // returns.
  bool watch_batch(const lane& l) {
    const auto waited = clock::now() - heartbeat_stamp;
    if (waited < options.stall_timeout) return false;
    fail(std::make_exception_ptr(error(errc::stalled, "kernel '" + spec.name + "' on device '" + dev.name() +
                                                          "' stalled: its batch of " + std::to_string(l.n) +
                                                          " messages from ring '" + in->name() +
                                                          "' has not returned after " + ms(waited))));
    return true;
  }

  // Takes a device worker for the next launch, if the device budgets them; false: all are held
  // for now, retry on a later tick.
  bool acquire_worker() {
    if (dev.info().persistent_budget == 0 || slot) return true;
    slot = first_slot ? std::move(first_slot) : dev.budget().try_acquire(chosen_mode, spec.name);
    return static_cast<bool>(slot);
  }

  void observe_counters() {
    // Widen the kernel's 32-bit wrapping counters into 64-bit totals.
    const auto in_now = load_ctl(ctl_svm->msgs_in);
    const auto out_now = load_ctl(ctl_svm->msgs_out);
    msgs_in.fetch_add(in_now - last_in, std::memory_order_relaxed);
    msgs_out.fetch_add(out_now - last_out, std::memory_order_relaxed);
    last_in = in_now;
    last_out = out_now;
    public_state.store(static_cast<kernel_state>(load_ctl(ctl_svm->state)), std::memory_order_relaxed);
  }

  // A parked kernel holding a worker others wait for leaves after a short idle spell.
  void yield_when_contended() {
    if (chosen_mode != kernel_mode::parked) return;
    const std::uint32_t budget = dev.budget().contended() ? contended_idle_budget : std::max(1u, options.idle_budget);
    if (budget != idle_budget_now) {
      store_ctl(ctl_svm->idle_budget, budget);
      idle_budget_now = budget;
    }
  }

  void watch_heartbeat() {
    const auto beat = load_ctl(ctl_svm->heartbeat);
    const auto now = clock::now();
    if (beat != last_heartbeat) {
      last_heartbeat = beat;
      heartbeat_stamp = now;
      return;
    }
    if (now - heartbeat_stamp < options.stall_timeout) return;
    const auto state = static_cast<kernel_state>(load_ctl(ctl_svm->state));
    const auto queued = has_input ? in->size() : 0u;
    std::string why = state == kernel_state::launched
                          ? "was launched " + ms(now - heartbeat_stamp) +
                                " ago and has not started: every worker of pool '" + dev.budget().pool() + "' is busy"
                          : "stalled: its heartbeat stayed at " + std::to_string(beat) + " for " +
                                ms(now - heartbeat_stamp) + " while " + std::to_string(queued) +
                                " messages waited in ring '" + in->name() + "'";
    store_ctl(ctl_svm->stop, static_cast<std::uint32_t>(kernel_stop::now));
    fail(std::make_exception_ptr(
        error(errc::stalled, "kernel '" + spec.name + "' on device '" + dev.name() + "' " + why)));
  }

  bool finish(kernel_state state) {
    slot.release();
    first_slot.release();
    public_state.store(state);
    {
      std::lock_guard lock(mutex);
      finished_flag.store(true, std::memory_order_release);
    }
    done.notify_all();
    return false;
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      if (!failure) failure = std::move(e);
    }
    // A failed kernel that still runs is left to exit on its own: its memory stays alive in
    // the proxy, which the running launch's tick keeps.
    if (in_flight) {
      reaping = true;
      boost::asio::post(strand, [self = shared_from_this()] { self->reap(); });
      public_state.store(kernel_state::faulted);
      std::lock_guard lock(mutex);
      done.notify_all();
      return;
    }
    finish(kernel_state::faulted);
  }

  // After a failure: wait for the launch to return before releasing its worker.
  void reap() {
    if (running.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>() == CL_COMPLETE ||
        running.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>() < 0) {
      in_flight = false;
      finish(kernel_state::faulted);
      return;
    }
    timer.expires_after(std::chrono::milliseconds(1));
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->reap();
    });
  }

  // ---- requests from other threads ----
  void request_stop(kernel_stop s) {
    auto current = stop_request.load();
    while (static_cast<std::uint32_t>(s) > static_cast<std::uint32_t>(current) &&
           !stop_request.compare_exchange_weak(current, s)) {
    }
    if (ctl_svm != nullptr) store_ctl(ctl_svm->stop, static_cast<std::uint32_t>(stop_request.load()));
    wake();
  }
  void wake() {
    if (!started) return;
    boost::asio::post(strand, [self = shared_from_this()] {
      self->idle_delay = std::chrono::microseconds(20);
      self->timer.cancel();
      self->tick();
    });
  }

  // Waits until finished (or failed); true when it ended within the timeout.
  bool wait_finished(std::chrono::nanoseconds timeout) {
    std::unique_lock lock(mutex);
    return done.wait_for(lock, timeout, [&] { return finished_flag.load() || failure != nullptr; });
  }

  // Waits until the kernel's last launch has returned and the proxy finished.
  bool wait_exited(std::chrono::nanoseconds timeout) {
    std::unique_lock lock(mutex);
    return done.wait_for(lock, timeout, [&] { return finished_flag.load(); });
  }

  std::string describe() {
    std::string s = "kernel '" + spec.name + "' on device '" + dev.name() + "' (" +
                    std::string(to_string(chosen_mode)) + ", state " + std::string(to_string(public_state.load())) +
                    ")";
    if (has_input) s += ", " + std::to_string(in->size()) + " messages queued in ring '" + in->name() + "'";
    if (has_output)
      s += ", output ring '" + out->name() + "' fill " + std::to_string(out->size()) + "/" +
           std::to_string(out->capacity());
    return s;
  }

  device dev;
  kernel_spec spec;
  kernel_options options;
  std::size_t in_bytes;
  std::size_t out_bytes;
  cl::Program program;
  cl::Kernel kernel;
  cl::CommandQueue queue;
  cl::Buffer state; // spec.state_bytes of the kernel's own memory
  std::uint32_t local_size = 1;
  boost::asio::strand<boost::asio::io_context::executor_type> strand;
  boost::asio::steady_timer timer;

  bool started = false;
  bool has_input = false;
  bool has_output = false;
  bool shared_memory = false;
  kernel_mode chosen_mode = kernel_mode::batched;
  std::shared_ptr<ring_buffer> in;
  std::shared_ptr<ring_buffer> out;

  // shared memory: the control block in SVM
  control_block* ctl_svm = nullptr;
  // no shared memory: the control block in a device buffer, and lanes of device mirrors
  cl::Buffer ctl_buffer;
  cl::CommandQueue upload, download; // batches in and results out, beside the compute queue
  std::uint32_t mirror_capacity = 0;
  bool map_kernel = false;
  // A batch's input and results on the host side, in pinned memory.
  struct pinned {
    cl::Buffer buffer;
    std::byte* data = nullptr;
  };
  pinned pinned_staging(std::size_t bytes) {
    pinned p;
    p.buffer = cl::Buffer(dev.context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, std::max<std::size_t>(bytes, 4));
    p.data = static_cast<std::byte*>(
        queue.enqueueMapBuffer(p.buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, std::max<std::size_t>(bytes, 4)));
    return p;
  }
  void unmap(pinned& p) noexcept {
    if (p.data == nullptr) return;
    clEnqueueUnmapMemObject(queue(), p.buffer(), p.data, 0, nullptr, nullptr);
    p.data = nullptr;
  }
  // One batch in flight: its mirrors, staging, and the host memory its commands read and write
  // (untouched until `done` completes).
  struct lane {
    cl::Buffer in_mirror, out_mirror;
    pinned in_staging, out_staging;
    std::uint32_t n = 0;         // messages in the batch (and result room)
    std::uint32_t tail = 0;      // input ring counter of its first message
    std::uint32_t out_start = 0; // mirror counter of its first result
    bool ends_stream = false;
    std::uint32_t stop_word = 0, state_word = 0;
    ring_header in_header{}, out_header{};
    control_block ctl{}; // read back after the launch
    cl::Event done;      // the chain's last command
  };
  std::array<lane, 2> lanes;
  unsigned lane_count = 1; // 2: double-buffered
  unsigned front = 0;      // the oldest lane in flight
  unsigned in_flight_lanes = 0;
  std::uint64_t mirrored_in = 0, mirrored_out = 0;

  // strand-only state
  occupancy::slot first_slot;
  occupancy::slot slot;
  cl::Event running;
  bool in_flight = false;
  bool reaping = false; // failed while a launch runs: waiting for it to return
  std::uint32_t idle_budget_now = 0;
  std::uint32_t last_heartbeat = 0;
  clock::time_point heartbeat_stamp;
  std::chrono::microseconds idle_delay{20};
  std::uint32_t last_in = 0, last_out = 0;

  // shared with other threads
  std::atomic<kernel_stop> stop_request{kernel_stop::run};
  std::atomic<kernel_state> public_state{kernel_state::idle};
  std::atomic<std::uint64_t> msgs_in{0}, msgs_out{0}, launches{0}, overlapped{0};
  std::atomic<bool> finished_flag{false};
  std::mutex mutex;
  std::condition_variable done;
  std::exception_ptr failure;
};

} // namespace detail

ring_kernel_base::ring_kernel_base(runtime& rt, const device& dev, kernel_spec spec, std::size_t in_bytes,
                                   std::size_t out_bytes, kernel_options options)
    : proxy_(std::make_shared<detail::kernel_proxy>(rt, dev, std::move(spec), in_bytes, out_bytes, options)) {}

ring_kernel_base::~ring_kernel_base() {
  if (!proxy_->started) return;
  proxy_->request_stop(kernel_stop::now);
  // Wait for the launch itself to return (a failure alone does not mean it has). If it does not,
  // its memory stays alive with the proxy, which the pending tick or reap keeps: say so rather
  // than block forever.
  if (!proxy_->wait_exited(std::chrono::seconds(10))) {
    std::fprintf(stderr, "ringpipe: %s did not stop; leaving it running\n", proxy_->describe().c_str());
    return;
  }
  // On the strand, after the handler that saw the kernel exit has returned.
  auto released = std::make_shared<std::promise<void>>();
  auto done = released->get_future();
  boost::asio::dispatch(proxy_->strand, [proxy = proxy_, released] {
    proxy->release_device_objects();
    released->set_value();
  });
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    std::fprintf(stderr, "ringpipe: kernel '%s': no runtime thread released its device objects within 10 s\n",
                 proxy_->spec.name.c_str());
}

void ring_kernel_base::set_arg_bytes(unsigned index, const void* value, std::size_t size) {
  if (proxy_->started) throw error(errc::invalid_argument, "kernel '" + name() + "': set_arg after start()");
  proxy_->set_arg(index, value, size);
}

void ring_kernel_base::start_untyped(std::shared_ptr<ring_buffer> in, std::shared_ptr<ring_buffer> out) {
  proxy_->start(std::move(in), std::move(out));
}

const std::string& ring_kernel_base::name() const noexcept { return proxy_->spec.name; }
const device& ring_kernel_base::on_device() const noexcept { return proxy_->dev; }
kernel_mode ring_kernel_base::mode() const noexcept { return proxy_->chosen_mode; }
kernel_state ring_kernel_base::state() const noexcept { return proxy_->public_state.load(); }

kernel_stats ring_kernel_base::stats() const noexcept {
  kernel_stats s;
  s.msgs_in = proxy_->msgs_in.load(std::memory_order_relaxed);
  s.msgs_out = proxy_->msgs_out.load(std::memory_order_relaxed);
  s.launches = proxy_->launches.load(std::memory_order_relaxed);
  s.overlapped_launches = proxy_->overlapped.load(std::memory_order_relaxed);
  if (proxy_->ctl_svm != nullptr) s.heartbeat = proxy_->load_ctl(proxy_->ctl_svm->heartbeat);
  return s;
}

std::exception_ptr ring_kernel_base::failure() const {
  std::lock_guard lock(proxy_->mutex);
  return proxy_->failure;
}

void ring_kernel_base::notify() noexcept { proxy_->wake(); }

bool ring_kernel_base::wait_exited(std::chrono::nanoseconds timeout) noexcept {
  return !proxy_->started || proxy_->wait_exited(timeout);
}

void ring_kernel_base::stop_now() noexcept {
  if (proxy_->started) proxy_->request_stop(kernel_stop::now);
}

void ring_kernel_base::stop(std::chrono::nanoseconds timeout, std::error_code& ec) noexcept {
  ec.clear();
  if (!proxy_->started) return;
  proxy_->request_stop(kernel_stop::drain);
  if (!proxy_->wait_finished(timeout))
    ec = make_error_code(errc::timeout);
  else if (failure())
    ec = make_error_code(errc::kernel_fault);
}

void ring_kernel_base::stop(std::chrono::nanoseconds timeout) {
  std::error_code ec;
  stop(timeout, ec);
  if (auto f = failure()) std::rethrow_exception(f);
  if (ec) throw error(errc::timeout, proxy_->describe() + " did not stop within " + detail::ms(timeout));
}

void ring_kernel_base::wait(std::chrono::nanoseconds timeout) {
  if (!proxy_->started) throw error(errc::invalid_argument, "kernel '" + name() + "' was never started");
  const bool ended = proxy_->wait_finished(timeout);
  if (auto f = failure()) std::rethrow_exception(f);
  if (!ended) throw error(errc::timeout, proxy_->describe() + " did not finish within " + detail::ms(timeout));
}

} // namespace ringpipe
