// Proves that the oclgrind run of the suite would catch a bad kernel: writes one element past a
// buffer. Only ever run under oclgrind (ctest kernel.oclgrind.self_check), which must report it.
#include <ringpipe/opencl.hpp>

#include <cstdio>

int main() {
  const char* source = "__kernel void past_the_end(__global uint* a) { a[get_global_id(0) + 1] = 7u; }";
  cl::Context context(CL_DEVICE_TYPE_ALL);
  const auto dev = context.getInfo<CL_CONTEXT_DEVICES>().at(0);
  cl::Program program(context, source, true);
  cl::Kernel kernel(program, "past_the_end");
  cl::Buffer buffer(context, CL_MEM_READ_WRITE, 4 * sizeof(cl_uint));
  kernel.setArg(0, buffer);
  cl::CommandQueue queue(context, dev);
  queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(4), cl::NDRange(4));
  queue.finish();
  std::puts("kernel ran");
  return 0;
}
