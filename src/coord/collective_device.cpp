// Combines on a device: acc op= x as a kernel built from the operation's OpenCL C (one program per
// context, element type and operation, cached). A source the device cannot read in place (another
// context) is copied into a scratch array on the device first, on the path choose_copy() gives.
#include "../core/transfer_service.hpp"
#include "collective_steps.hpp"

#include <ringpipe/program.hpp>

#include <thread>

namespace ringpipe::detail {
namespace {

std::string combine_source(const element_op& op, std::size_t per_item) {
  std::string s;
  if (op.cl_type == "double") s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += "typedef " + op.cl_type + " rp_elem;\n";
  s += "inline rp_elem rp_combine_op(rp_elem a, rp_elem b) { return (" + op.cl_expression + "); }\n";
  const std::string per = std::to_string(per_item) + "ul";
  s += "__kernel void rp_combine(__global rp_elem* acc, ulong acc_at, __global const rp_elem* x, ulong x_at, "
       "ulong n) {\n"
       "  __global rp_elem* a = acc + acc_at;\n"
       "  __global const rp_elem* b = x + x_at;\n"
       "  const ulong lo = get_global_id(0) * " +
       per +
       ";\n"
       "  const ulong hi = min(lo + " +
       per +
       ", n);\n"
       "  for (ulong i = lo; i < hi; ++i) a[i] = rp_combine_op(a[i], b[i]);\n"
       "}\n";
  return s;
}

/// Binds `a` as kernel arguments `index` (its memory) and `index + 1` (its first element).
void bind(cl::Kernel& k, cl_uint index, const array_bytes& a, std::size_t element) {
  cl_ulong at = 0;
  if (a.memory() == array_memory::shared) {
    if (const cl_int e = clSetKernelArgSVMPointer(k(), index, a.data()); e != CL_SUCCESS)
      throw_opencl_error(e, "clSetKernelArgSVMPointer (combine)");
  } else {
    const cl_mem mem = a.buffer()();
    if (const cl_int e = clSetKernelArg(k(), index, sizeof(cl_mem), &mem); e != CL_SUCCESS)
      throw_opencl_error(e, "clSetKernelArg (combine)");
    at = a.offset_bytes() / element;
  }
  k.setArg(index + 1, at);
}

/// Whether a kernel on `d` can read `a` where it is: memory of its own context.
bool reads_in_place(const device& d, const array_bytes& a) { return d.shares_context_with(a.dev()); }

bool ended(const cl::Event& e) {
  if (e() == nullptr) return true;
  cl_int status = CL_COMPLETE;
  clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  return status <= CL_COMPLETE; // complete, or failed
}

} // namespace

device_combine::device_combine(collective_run& run, std::string_view step, const combine_task& task,
                               const element_op& op)
    : run_(run), step_(step), task_(task), op_(op) {
  const device& d = task.acc.dev();
  auto program = d.programs().get(d, combine_source(op, elements_per_item(d)), base_build_options(d),
                                  run.what() + " operation '" + op.name + "' (" + op.cl_expression + ")");
  kernel_ = cl_call("clCreateKernel rp_combine", [&] { return cl::Kernel(program, "rp_combine"); });
  for (const auto& s : task.sources)
    if (!reads_in_place(d, s)) {
      scratch_ = array_bytes(task.acc.owner(), d, task.acc.size_bytes(), run.what() + " scratch");
      break;
    }
}

device_combine::~device_combine() {
  // A failed run still lets what it started end before the arrays may go.
  while ((fetching_.valid() && fetching_.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) ||
         !ended(running_)) {
    if (std::chrono::steady_clock::now() > run_.deadline() + std::chrono::seconds(5)) {
      // Never returned: leave the memory it may still touch allocated.
      leave_allocated(task_, scratch_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void device_combine::fetch() {
  run_.before(on(), step_);
  if (reads_in_place(on(), source())) return;
  fetched_ = std::make_shared<std::promise<void>>();
  fetching_ = fetched_->get_future();
  start_copy_bytes(source(), scratch_, [p = fetched_](const std::exception_ptr& e) {
    if (e)
      p->set_exception(e);
    else
      p->set_value();
  });
}

void device_combine::launch() {
  if (fetching_.valid()) {
    if (fetching_.wait_until(run_.deadline()) != std::future_status::ready)
      run_.late(step_, on().label() + " (copying in from " + source().dev().label() + ")");
    try {
      fetching_.get();
    } catch (...) {
      run_.failed(step_, on(), std::current_exception());
    }
  }
  const array_bytes& x = reads_in_place(on(), source()) ? source() : scratch_;
  const std::size_t n = task_.acc.size_bytes() / op_.element;
  try {
    if (n == 0) return;
    bind(kernel_, 0, task_.acc, op_.element);
    bind(kernel_, 2, x, op_.element);
    kernel_.setArg(4, cl_ulong(n));
    auto& queue = task_.acc.owner().transfer_service()->queue(on());
    const std::size_t per_item = elements_per_item(on());
    cl_call("clEnqueueNDRangeKernel (combine)", [&] {
      queue.enqueueNDRangeKernel(kernel_, cl::NullRange, cl::NDRange((n + per_item - 1) / per_item), cl::NullRange,
                                 nullptr, &running_);
    });
    queue.flush();
  } catch (...) {
    run_.failed(step_, on(), std::current_exception());
  }
}

void device_combine::finish() {
  while (!ended(running_)) {
    if (std::chrono::steady_clock::now() > run_.deadline()) run_.late(step_, on().label() + " (its combine kernel)");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cl_int status = CL_COMPLETE;
  clGetEventInfo(running_(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  if (status < 0)
    run_.failed(
        step_, on(),
        std::make_exception_ptr(error(std::error_code(status, opencl_category()),
                                      std::string("the combine kernel failed with ") + opencl_error_name(status))));
  running_ = cl::Event();
  ++next_;
}

} // namespace ringpipe::detail
