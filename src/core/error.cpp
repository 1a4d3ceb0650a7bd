#include <ringpipe/error.hpp>

#include <string>

namespace ringpipe {
namespace {

class opencl_category_impl final : public std::error_category {
public:
  const char* name() const noexcept override { return "opencl"; }
  std::string message(int status) const override {
    return std::string(opencl_error_name(status)) + " (" + std::to_string(status) + ")";
  }
};

class ringpipe_category_impl final : public std::error_category {
public:
  const char* name() const noexcept override { return "ringpipe"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
    case errc::no_platform: return "no OpenCL platform found";
    case errc::no_device: return "no matching OpenCL device";
    case errc::build_failed: return "kernel build failed";
    case errc::message_size: return "message size mismatch";
    case errc::unsupported_mode: return "ring-kernel mode not supported by the device";
    case errc::budget_exceeded: return "persistent-kernel budget exceeded";
    case errc::timeout: return "timed out";
    case errc::stalled: return "kernel stalled";
    case errc::kernel_fault: return "kernel reported an error";
    case errc::closed: return "ring closed";
    case errc::invalid_argument: return "invalid argument";
    case errc::invalid_pipeline: return "invalid pipeline";
    case errc::stage_failed: return "stage failed";
    case errc::cancelled: return "cancelled: the pipeline stopped or failed";
    case errc::out_of_memory: return "out of memory";
    case errc::device_failed: return "a device failed its part";
    case errc::remote_failed: return "another rank failed or stopped answering";
    }
    return "unknown ringpipe error";
  }
};

} // namespace

const std::error_category& opencl_category() noexcept {
  static const opencl_category_impl instance;
  return instance;
}

const std::error_category& ringpipe_category() noexcept {
  static const ringpipe_category_impl instance;
  return instance;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), ringpipe_category()}; }

const char* opencl_error_name(int status) noexcept {
  switch (status) {
#define RINGPIPE_CL_NAME(code)                                                                                         \
  case code: return #code;
    RINGPIPE_CL_NAME(CL_SUCCESS)
    RINGPIPE_CL_NAME(CL_DEVICE_NOT_FOUND)
    RINGPIPE_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
    RINGPIPE_CL_NAME(CL_COMPILER_NOT_AVAILABLE)
    RINGPIPE_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    RINGPIPE_CL_NAME(CL_OUT_OF_RESOURCES)
    RINGPIPE_CL_NAME(CL_OUT_OF_HOST_MEMORY)
    RINGPIPE_CL_NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
    RINGPIPE_CL_NAME(CL_MEM_COPY_OVERLAP)
    RINGPIPE_CL_NAME(CL_IMAGE_FORMAT_MISMATCH)
    RINGPIPE_CL_NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    RINGPIPE_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
    RINGPIPE_CL_NAME(CL_MAP_FAILURE)
    RINGPIPE_CL_NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    RINGPIPE_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    RINGPIPE_CL_NAME(CL_COMPILE_PROGRAM_FAILURE)
    RINGPIPE_CL_NAME(CL_LINKER_NOT_AVAILABLE)
    RINGPIPE_CL_NAME(CL_LINK_PROGRAM_FAILURE)
    RINGPIPE_CL_NAME(CL_DEVICE_PARTITION_FAILED)
    RINGPIPE_CL_NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    RINGPIPE_CL_NAME(CL_INVALID_VALUE)
    RINGPIPE_CL_NAME(CL_INVALID_DEVICE_TYPE)
    RINGPIPE_CL_NAME(CL_INVALID_PLATFORM)
    RINGPIPE_CL_NAME(CL_INVALID_DEVICE)
    RINGPIPE_CL_NAME(CL_INVALID_CONTEXT)
    RINGPIPE_CL_NAME(CL_INVALID_QUEUE_PROPERTIES)
    RINGPIPE_CL_NAME(CL_INVALID_COMMAND_QUEUE)
    RINGPIPE_CL_NAME(CL_INVALID_HOST_PTR)
    RINGPIPE_CL_NAME(CL_INVALID_MEM_OBJECT)
    RINGPIPE_CL_NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    RINGPIPE_CL_NAME(CL_INVALID_IMAGE_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_SAMPLER)
    RINGPIPE_CL_NAME(CL_INVALID_BINARY)
    RINGPIPE_CL_NAME(CL_INVALID_BUILD_OPTIONS)
    RINGPIPE_CL_NAME(CL_INVALID_PROGRAM)
    RINGPIPE_CL_NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    RINGPIPE_CL_NAME(CL_INVALID_KERNEL_NAME)
    RINGPIPE_CL_NAME(CL_INVALID_KERNEL_DEFINITION)
    RINGPIPE_CL_NAME(CL_INVALID_KERNEL)
    RINGPIPE_CL_NAME(CL_INVALID_ARG_INDEX)
    RINGPIPE_CL_NAME(CL_INVALID_ARG_VALUE)
    RINGPIPE_CL_NAME(CL_INVALID_ARG_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_KERNEL_ARGS)
    RINGPIPE_CL_NAME(CL_INVALID_WORK_DIMENSION)
    RINGPIPE_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_WORK_ITEM_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_GLOBAL_OFFSET)
    RINGPIPE_CL_NAME(CL_INVALID_EVENT_WAIT_LIST)
    RINGPIPE_CL_NAME(CL_INVALID_EVENT)
    RINGPIPE_CL_NAME(CL_INVALID_OPERATION)
    RINGPIPE_CL_NAME(CL_INVALID_GL_OBJECT)
    RINGPIPE_CL_NAME(CL_INVALID_BUFFER_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_MIP_LEVEL)
    RINGPIPE_CL_NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_PROPERTY)
    RINGPIPE_CL_NAME(CL_INVALID_IMAGE_DESCRIPTOR)
    RINGPIPE_CL_NAME(CL_INVALID_COMPILER_OPTIONS)
    RINGPIPE_CL_NAME(CL_INVALID_LINKER_OPTIONS)
    RINGPIPE_CL_NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
    RINGPIPE_CL_NAME(CL_INVALID_PIPE_SIZE)
    RINGPIPE_CL_NAME(CL_INVALID_DEVICE_QUEUE)
    RINGPIPE_CL_NAME(CL_INVALID_SPEC_ID)
    RINGPIPE_CL_NAME(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
#undef RINGPIPE_CL_NAME
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
  default: return "CL_UNKNOWN_ERROR";
  }
}

void throw_opencl_error(int status, const char* where) {
  if (status == -1001) {
    throw error(errc::no_platform, std::string("no OpenCL platform found (CL_PLATFORM_NOT_FOUND_KHR (-1001) in ") +
                                       where + "): install pocl-opencl-icd, or check OCL_ICD_VENDORS");
  }
  throw error(std::error_code(status, opencl_category()),
              std::string(opencl_error_name(status)) + " (" + std::to_string(status) + ") in " + where);
}

build_error::build_error(std::string kernel_name, const std::string& device_name, std::string log)
    : error(errc::build_failed,
            "kernel '" + kernel_name + "' failed to build for device '" + device_name + "':\n" + log),
      kernel_name_(std::move(kernel_name)), log_(std::move(log)) {}

build_error::build_error(const build_error& failure, const std::string& context)
    : error(failure.code(), context + ": " + failure.what()), kernel_name_(failure.kernel_name_), log_(failure.log_) {}

} // namespace ringpipe
