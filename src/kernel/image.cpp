#include "image.hpp"

#include <ringpipe/program.hpp>
#include <ringpipe/ring.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

namespace ringpipe::detail {
namespace {

// What a kernel declared with RP_DECLARE_KERNEL_STATE (stage.clh): its message sizes, kind and
// state size.
struct declaration {
  std::size_t in_bytes = 0;
  std::size_t out_bytes = 0;
  bool map = false;            // consumes whole batches, at most one result per message, no state
  std::size_t state_bytes = 0; // declared by RINGPIPE_STATEFUL_KERNEL; 0: none declared
};
constexpr unsigned long kind_map = 1; // RP_KIND_MAP

// The third value packs the kind (low two bits) and the state size (the rest).
declaration decode(unsigned long in, unsigned long out, unsigned long kind_and_state) {
  return declaration{in, out, (kind_and_state & 3) == kind_map, kind_and_state >> 2};
}

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
  return decode(in - 1, out - 1, kind - 1);
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
    return decode(values[0], values[1], values[2]);
  });
}

// Sets a pointer argument to NULL (a buffer's or an SVM pointer's alike), so that a shelved
// kernel object holds no memory of its last user.
bool clear_pointer_arg(const cl::Kernel& k, unsigned at) noexcept {
  const cl_mem none = nullptr; // a value, not a null pointer: also zeroes a scalar of that size
  return clSetKernelArg(k(), at, sizeof(cl_mem), &none) == CL_SUCCESS;
}

// The kernel object `name` of `program`: one an earlier image shelved, with its note, or a new one
// (note 0). `optional`: nothing where the program does not define it; otherwise that throws.
std::optional<shelved_kernel> kernel_object(const device& dev, const cl::Program& program, const std::string& name,
                                            bool optional) {
  if (auto shelved = dev.programs().take_kernel(program, name)) return shelved;
  cl_int status = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program(), name.c_str(), &status);
  if (status == CL_SUCCESS) return shelved_kernel{cl::Kernel(k), 0};
  if (optional) return std::nullopt;
  throw_opencl_error(status, ("clCreateKernel '" + name + "'").c_str());
}

// What kernel `name` declared, or nothing if it declared nothing.
std::optional<declaration> declared(const device& dev, const cl::Program& program, const std::string& name) {
  const std::string sizes_name = name + "__ringpipe_sizes";
  auto sizes = kernel_object(dev, program, sizes_name, true);
  if (!sizes) return std::nullopt;
  auto found = declaration_from_attributes(sizes->kernel);
  if (!found) found = declaration_from_launch(dev, sizes->kernel, name);
  if (clear_pointer_arg(sizes->kernel, 0)) dev.programs().shelve_kernel(program, sizes_name, std::move(*sizes));
  return found;
}

// A name the program does not define is said as such, with the kernels it does define.
void refuse_unknown_kernel(const cl::Program& program, const std::string& name) {
  std::string names;
  try {
    names = program.getInfo<CL_PROGRAM_KERNEL_NAMES>();
  } catch (const cl::Error&) {
    return; // not reported here: clCreateKernel will say it
  }
  std::string defined;
  bool found = false;
  for (std::size_t start = 0; start <= names.size();) {
    auto end = names.find(';', start);
    if (end == std::string::npos) end = names.size();
    const auto kernel = names.substr(start, end - start);
    start = end + 1;
    if (kernel.empty() || kernel.ends_with("__ringpipe_sizes") || kernel.ends_with("__span")) continue;
    found = found || kernel == name;
    defined += (defined.empty() ? "" : ", ") + kernel;
  }
  if (!found)
    throw error(errc::invalid_argument, "kernel '" + name + "' is not defined by its program, which defines: " +
                                            (defined.empty() ? std::string("no kernel") : defined));
}

} // namespace

// Arguments the kernel does not take would fail clSetKernelArg with a bare index, and arguments
// left unset every launch with CL_INVALID_KERNEL_ARGS: both are said here with the counts.
std::string kernel_image::describe_args() const {
  return "kernel '" + name_ + "' takes " + std::to_string(own_args_set_.size()) + " argument(s) of its own after " +
         (has_state_ ? "RINGPIPE_KERNEL_PARAMS and its state" : "RINGPIPE_KERNEL_PARAMS");
}

void kernel_image::count_args(const kernel_spec& spec) {
  const auto takes = kernel_.getInfo<CL_KERNEL_NUM_ARGS>();
  const std::size_t fixed = 3 + (has_state_ ? 1 : 0);
  if (takes < fixed) {
    throw error(errc::invalid_argument, "kernel '" + spec.name + "' takes " + std::to_string(takes) +
                                            " arguments, but a ring kernel starts with RINGPIPE_KERNEL_PARAMS (3)" +
                                            (has_state_ ? " and its state (1)" : ""));
  }
  own_args_set_.assign(takes - fixed, false);
  own_args_memory_.assign(takes - fixed, false);
  if (spec.args.size() > own_args_set_.size())
    throw error(errc::invalid_argument,
                describe_args() + ", but kernel_spec::args gives " + std::to_string(spec.args.size()));
}

void kernel_image::check_args_set() const {
  std::string unset;
  for (std::size_t i = 0; i < own_args_set_.size(); ++i)
    if (!own_args_set_[i]) unset += (unset.empty() ? "" : ", ") + std::to_string(i);
  if (!unset.empty())
    throw error(errc::invalid_argument, describe_args() + "; not set: " + unset + " (kernel_spec::args or set_arg)");
}

std::string describe_size(std::size_t bytes) {
  return bytes == 0 ? "no ring" : std::to_string(bytes) + "-byte messages";
}

std::string ms(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

kernel_image::kernel_image(const device& dev, const kernel_spec& spec, std::size_t in_bytes, std::size_t out_bytes,
                           const kernel_options& options)
    : dev_(&dev), name_(spec.name) {
  std::string build_options = base_build_options(dev);
  if (!spec.build_options.empty()) build_options += " " + spec.build_options;
  const auto source_name = spec.source_name.empty() ? "kernel '" + spec.name + "'" : spec.source_name;
  program_ =
      dev.programs().get(dev, resolve_includes(spec.source, source_name, spec.include_dirs), build_options, spec.name);
  refuse_unknown_kernel(program_, spec.name);
  const auto sizes = declared(dev, program_, spec.name);
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
  map_ = sizes->map;
  const std::size_t state_bytes = sizes->state_bytes != 0 ? sizes->state_bytes : spec.state_bytes;
  if (sizes->state_bytes != 0 && spec.state_bytes != 0 && spec.state_bytes != sizes->state_bytes) {
    throw error(errc::invalid_argument, "kernel '" + spec.name + "' declares " + std::to_string(sizes->state_bytes) +
                                            " bytes of state, but kernel_spec::state_bytes says " +
                                            std::to_string(spec.state_bytes) + " (leave it 0 to use the declaration)");
  }
  has_state_ = state_bytes > 0;
  auto main = kernel_object(dev, program_, spec.name, false);
  kernel_ = std::move(main->kernel);
  const auto kernel_max = kernel_.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(dev.cl_device());
  const auto limit =
      static_cast<std::uint32_t>(std::min<std::size_t>({kernel_max, dev.info().max_work_group_size, max_group}));
  // A kernel that fixes its group size (raw kernels: reqd_work_group_size(1, 1, 1)) gets it.
  const auto required = kernel_.getWorkGroupInfo<CL_KERNEL_COMPILE_WORK_GROUP_SIZE>(dev.cl_device())[0];
  if (required != 0 && options.local_size != 0 && options.local_size != required) {
    throw error(errc::invalid_argument, "kernel '" + spec.name + "' requires a group of " + std::to_string(required) +
                                            " work-items, not " + std::to_string(options.local_size));
  }
  const auto group = [&](std::uint32_t by_default) {
    return required != 0             ? static_cast<std::uint32_t>(required)
           : options.local_size != 0 ? options.local_size
                                     : by_default;
  };
  local_size_ = group(std::min(dev.info().round_group, limit));
  batch_local_size_ = group(std::min<std::uint32_t>(64, limit));
  if (has_state_) {
    cl_call("allocating kernel state", [&] {
      state_ = cl::Buffer(dev.context(), CL_MEM_READ_WRITE, state_bytes);
      cl::CommandQueue queue(dev.context(), dev.cl_device());
      const std::vector<std::byte> zeros(state_bytes);
      queue.enqueueWriteBuffer(state_, CL_TRUE, 0, state_bytes, zeros.data());
      kernel_.setArg(3, state_);
      return 0;
    });
  }
  count_args(spec);
  std::uint64_t span_note = 0;
  if (map_ && !has_state_)
    if (auto span = kernel_object(dev, program_, spec.name + "__span", true))
      span_kernel_ = std::move(span->kernel), span_note = span->note;
  for (std::size_t i = 0; i < spec.args.size(); ++i)
    set_arg(static_cast<unsigned>(i), spec.args[i].bytes.data(), spec.args[i].bytes.size());
  // PoCL's compiler aborts the process ("Could not find a dominating alternative variable") on a
  // map ring kernel's round, barriers in a loop, for groups of one or two work-items.
  if (map_ && local_size_ < 3 && dev.info().platform.find("Portable Computing Language") != std::string::npos) {
    throw error(errc::invalid_argument, "kernel '" + spec.name + "': local size " + std::to_string(local_size_) +
                                            " on device '" + dev.name() +
                                            "': PoCL cannot compile a map ring kernel of fewer than 3 work-items "
                                            "(its compiler aborts); leave local_size 0 or give 3 or more");
  }
  if (local_size_ > limit) {
    throw error(errc::invalid_argument, "kernel '" + spec.name + "': local size " + std::to_string(local_size_) +
                                            " exceeds the limit of " + std::to_string(limit) + " on device '" +
                                            dev.name() + "'");
  }
  // Only where every launch returns by itself: on a device that also runs resident kernels (PoCL)
  // this launch could wait behind them for a worker for as long as they run.
  const bool all_args_set = std::find(own_args_set_.begin(), own_args_set_.end(), false) == own_args_set_.end();
  // A kernel object an earlier image compiled for these group sizes needs no compiling (noted
  // when shelved; 0: not compiled here).
  const std::uint64_t sizes_note = std::uint64_t{local_size_} << 32 | batch_local_size_;
  if (main->note == sizes_note && (span_kernel_() == nullptr || span_note == sizes_note)) {
    compiled_note_ = sizes_note;
  } else if (map_ && !has_state_ && all_args_set && !dev.info().supports(kernel_mode::parked)) {
    compile_by_launching(dev, std::max(in_bytes, out_bytes));
    compiled_note_ = sizes_note;
  }
}

constexpr std::uint32_t span_compile_only = 0xffffffffu; // RP_SPAN_COMPILE_ONLY (span.clh)

// Some drivers compile a kernel at its first launch, not at clBuildProgram (Mesa's llvmpipe: 10 s
// for a map kernel of 4 KiB messages with a cold shader cache, 0.1 s for 16 bytes). Launched
// here once, over scratch memory with a stop request already posted, the kernel is compiled while
// the caller waits for the build (and its notice says so), not while a stream waits on the first
// batch. The scaffold's leader sees the stop at its first poll and leaves; no message is touched.
void kernel_image::compile_by_launching(const device& dev, std::size_t slot_bytes) {
  control_block stop_posted{};
  stop_posted.stop = static_cast<std::uint32_t>(kernel_stop::now);
  std::vector<std::byte> empty_ring(sizeof(ring_header) + slot_bytes);
  cl_call(("the first launch of kernel '" + name_ + "' on device '" + dev.name() + "', which compiles it").c_str(),
          [&] {
            cl::Buffer ctl(dev.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof stop_posted, &stop_posted);
            const auto ring = [&] {
              return cl::Buffer(dev.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, empty_ring.size(),
                                empty_ring.data());
            };
            cl::Buffer in = ring(), out = ring();
            kernel_.setArg(0, ctl);
            kernel_.setArg(1, in);
            kernel_.setArg(2, out);
            cl::CommandQueue queue(dev.context(), dev.cl_device());
            queue.enqueueNDRangeKernel(kernel_, cl::NullRange, cl::NDRange(local_size_), cl::NDRange(local_size_));
            if (span_kernel_() != nullptr) {
              // Its span form too, in both group sizes batches use (mirror_spans.cpp); every item
              // leaves at once (RP_SPAN_COMPILE_ONLY in span.clh).
              cl::Buffer keep(dev.context(), CL_MEM_READ_WRITE, batch_local_size_);
              span_kernel_.setArg(0, ctl);
              span_kernel_.setArg(1, in);
              span_kernel_.setArg(2, out);
              span_kernel_.setArg(span_args_at(), keep);
              span_kernel_.setArg(span_args_at() + 1, span_compile_only);
              span_kernel_.setArg(span_args_at() + 2, 0u);
              for (const std::uint32_t group : {batch_local_size_, 1u})
                queue.enqueueNDRangeKernel(span_kernel_, cl::NullRange, cl::NDRange(group), cl::NDRange(group));
            }
            queue.finish();
            return 0;
          });
}

unsigned kernel_image::own_arg_at(unsigned index) const {
  if (index >= own_args_set_.size())
    throw error(errc::invalid_argument, describe_args() + ": there is no argument " + std::to_string(index));
  return 3 + (has_state_ ? 1 : 0) + index;
}

void kernel_image::set_arg(unsigned index, const void* value, std::size_t size) {
  const unsigned at = own_arg_at(index);
  if (const cl_int s = clSetKernelArg(kernel_(), at, size, value); s != CL_SUCCESS)
    throw_opencl_error(s, ("clSetKernelArg " + std::to_string(index) + " of kernel '" + name_ + "'").c_str());
  if (span_kernel_() != nullptr)
    if (const cl_int s = clSetKernelArg(span_kernel_(), at, size, value); s != CL_SUCCESS)
      throw_opencl_error(s, ("clSetKernelArg " + std::to_string(index) + " of kernel '" + name_ + "__span'").c_str());
  own_args_set_[index] = true;
  own_args_memory_[index] = size == sizeof(cl_mem); // may be a buffer: cleared before shelving
}

void kernel_image::set_arg_svm(unsigned index, void* pointer) {
  const unsigned at = own_arg_at(index);
  for (const cl::Kernel* k : {&kernel_, &span_kernel_})
    if ((*k)() != nullptr)
      if (const cl_int s = clSetKernelArgSVMPointer((*k)(), at, pointer); s != CL_SUCCESS)
        throw_opencl_error(
            s, ("clSetKernelArgSVMPointer " + std::to_string(index) + " of kernel '" + name_ + "'").c_str());
  own_args_set_[index] = true;
  own_args_memory_[index] = true;
}

void kernel_image::shelve(cl::Kernel& k, const std::string& name, bool span) noexcept {
  // Every argument that may hold memory: the rings and control block, the state, the user's
  // buffers and SVM pointers, and the span form's keep flags.
  std::vector<unsigned> pointers = {0, 1, 2};
  if (has_state_) pointers.push_back(3);
  for (unsigned i = 0; i < own_args_memory_.size(); ++i)
    if (own_args_memory_[i]) pointers.push_back(3 + (has_state_ ? 1 : 0) + i);
  if (span) pointers.push_back(span_args_at());
  if (std::all_of(pointers.begin(), pointers.end(), [&](unsigned at) { return clear_pointer_arg(k, at); }))
    dev_->programs().shelve_kernel(program_, name, {k, compiled_note_});
  k = cl::Kernel();
}

void kernel_image::release() noexcept {
  // Shelved for the next image of this kernel; the drivers finished every launch before this.
  if (kernel_() != nullptr) shelve(kernel_, name_, false);
  if (span_kernel_() != nullptr) shelve(span_kernel_, name_ + "__span", true);
  state_ = cl::Buffer();
  kernel_ = cl::Kernel();
  span_kernel_ = cl::Kernel();
  program_ = cl::Program();
}

} // namespace ringpipe::detail
