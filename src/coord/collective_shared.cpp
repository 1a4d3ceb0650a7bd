// The shared-memory pass: every array lies in fine-grained SVM of one context, so each device's
// kernel reads its peers' inputs in place and writes its part of every output: a reduce-scatter
// and an all-gather fused into one launch per device and one synchronisation. Each element is
// read once from every input and written once to every output, the least any algorithm can do.
#include "../core/transfer_service.hpp"
#include "collective_steps.hpp"

#include <ringpipe/program.hpp>

#include <future>

namespace ringpipe::detail {
namespace {

std::string pass_source(const element_op& op, std::size_t inputs, std::size_t outputs, std::size_t per_item) {
  std::string s;
  if (op.cl_type == "double") s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += "typedef " + op.cl_type + " rp_elem;\n";
  s += "inline rp_elem rp_combine_op(rp_elem a, rp_elem b) { return (" + op.cl_expression + "); }\n";
  s += "__kernel void rp_pass(";
  for (std::size_t k = 0; k < inputs; ++k)
    s += "__global const rp_elem* in" + std::to_string(k) + ", ";
  for (std::size_t k = 0; k < outputs; ++k)
    s += "__global rp_elem* out" + std::to_string(k) + ", ";
  s += "ulong n) {\n  const ulong lo = get_global_id(0) * " + std::to_string(per_item) + "ul;\n";
  s += "  const ulong hi = min(lo + " + std::to_string(per_item) + "ul, n);\n";
  s += "  for (ulong i = lo; i < hi; ++i) {\n    rp_elem r = in0[i];\n";
  for (std::size_t k = 1; k < inputs; ++k)
    s += "    r = rp_combine_op(r, in" + std::to_string(k) + "[i]);\n";
  for (std::size_t k = 0; k < outputs; ++k)
    s += "    out" + std::to_string(k) + "[i] = r;\n";
  return s + "  }\n}\n";
}

/// The pass's launches; on the way out (also after a failure) waits for each to end, so no kernel
/// still reads or writes an array its caller may free; memory of one that never ends is left.
class launches {
public:
  explicit launches(const collective_run& run) : run_(run) {}
  ~launches() {
    for (std::size_t i = 0; i < endings_.size(); ++i) // a valid ending was not waited for
      if (endings_[i].valid() &&
          endings_[i].wait_until(run_.deadline() + std::chrono::seconds(5)) != std::future_status::ready)
        leave_allocated(*parts_[i]);
  }
  void add(const pass_part& p, std::future<cl_int> ending) {
    parts_.push_back(&p);
    endings_.push_back(std::move(ending));
  }
  /// Waits for every launch; throws for the first that failed or is late.
  void wait(std::string_view step) {
    for (std::size_t i = 0; i < endings_.size(); ++i)
      run_.wait_ended(step, endings_[i], *parts_[i]->on, "its kernel");
  }

private:
  const collective_run& run_;
  std::vector<const pass_part*> parts_;
  std::vector<std::future<cl_int>> endings_;
};

} // namespace

std::size_t elements_per_item(const device& d) { return d.info().type == device_type::cpu ? 4096 : 1; }

void shared_pass(collective_run& run, std::string_view step, const std::vector<pass_part>& parts,
                 const element_op& op) {
  launches running(run);
  for (const auto& p : parts) {
    const device& d = *p.on;
    run.before(d, step);
    const std::size_t n = p.inputs.front().size_bytes() / op.element;
    if (n == 0) continue;
    const std::size_t per_item = elements_per_item(d);
    std::future<cl_int> ending;
    try {
      auto program =
          d.programs().get(d, pass_source(op, p.inputs.size(), p.outputs.size(), per_item), base_build_options(d),
                           run.what() + " operation '" + op.name + "' (" + op.cl_expression + ")");
      cl::Kernel k = cl_call("clCreateKernel rp_pass", [&] { return cl::Kernel(program, "rp_pass"); });
      cl_uint arg = 0;
      for (const auto* list : {&p.inputs, &p.outputs})
        for (const auto& a : *list)
          if (const cl_int e = clSetKernelArgSVMPointer(k(), arg++, a.data()); e != CL_SUCCESS)
            throw_opencl_error(e, "clSetKernelArgSVMPointer (shared pass)");
      k.setArg(arg, cl_ulong(n));
      auto& queue = p.inputs.front().owner().transfer_service()->queue(d);
      cl::Event done;
      cl_call("clEnqueueNDRangeKernel (shared pass)", [&] {
        queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange((n + per_item - 1) / per_item), cl::NullRange, nullptr,
                                   &done);
      });
      ending = ending_of(done);
      queue.flush();
    } catch (const build_error&) {
      throw;
    } catch (...) {
      run.failed(step, d, std::current_exception());
    }
    running.add(p, std::move(ending));
  }
  running.wait(step);
}

} // namespace ringpipe::detail
