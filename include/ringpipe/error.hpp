#pragma once
// Errors: every failure is a ringpipe::error (a std::system_error). OpenCL status codes use
// opencl_category(), which names them; ringpipe's own conditions use ringpipe_category().

#include <string>
#include <system_error>

namespace ringpipe {

/// ringpipe's own error conditions (value 0 is success, as for std::errc).
enum class errc {
  no_platform = 1,  ///< the ICD loader found no OpenCL platform
  no_device,        ///< discovery, or a device filter, matched no device
  build_failed,     ///< a kernel program failed to compile
  message_size,     ///< a message type does not match what a kernel or ring was built for
  unsupported_mode, ///< a ring-kernel mode the device cannot run
  budget_exceeded,  ///< more resident kernels than the device can keep running
  timeout,          ///< a bounded wait ran out
  stalled,          ///< a kernel stopped making progress while it had work
  kernel_fault,     ///< a kernel reported an error code
  closed,           ///< a push into a ring that was closed
  invalid_argument, ///< a bad parameter (capacity, sizes, ...)
  invalid_pipeline, ///< a cycle, an unconnected port or an impossible link, found before launch
  stage_failed,     ///< a host stage's function threw
  cancelled,        ///< a wait on a ring ended because its pipeline stopped or failed
  out_of_memory,    ///< a ring, control block or buffer could not be allocated
  device_failed,    ///< a device failed its part of a collective (the message names it)
  remote_failed,    ///< another rank failed, stopped answering, or sent what this rank cannot take
};

const std::error_category& opencl_category() noexcept;
const std::error_category& ringpipe_category() noexcept;

std::error_code make_error_code(errc e) noexcept;

/// Name of an OpenCL status code, e.g. "CL_INVALID_KERNEL_NAME"; "CL_UNKNOWN_ERROR" if unknown.
const char* opencl_error_name(int status) noexcept;

/// The error every ringpipe call throws. what() is exactly the message given: it already names
/// the failing call, stage or kernel, so the category's text is not appended.
class error : public std::system_error {
public:
  error(std::error_code code, std::string message) : std::system_error(code), message_(std::move(message)) {}
  error(errc code, std::string message) : error(make_error_code(code), std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

private:
  std::string message_;
};

/// A kernel program that failed to build; carries the kernel's name and the compiler's log.
class build_error : public error {
public:
  build_error(std::string kernel_name, const std::string& device_name, std::string log);
  /// The same failure, its message prefixed with where it happened ("pipeline 'p': stage 's'").
  build_error(const build_error& failure, const std::string& context);
  const std::string& kernel_name() const noexcept { return kernel_name_; }
  const std::string& build_log() const noexcept { return log_; }

private:
  std::string kernel_name_;
  std::string log_;
};

/// Throws ringpipe::error for a failed OpenCL call, e.g. "CL_INVALID_VALUE (-30) in clSVMAlloc".
[[noreturn]] void throw_opencl_error(int status, const char* where);

/// Runs an OpenCL call and turns a CLHPP exception into ringpipe::error, naming the call.
template <class F> decltype(auto) cl_call(const char* where, F&& f);

} // namespace ringpipe

// The standard library's trait, left out of the API reference.
/// \cond
template <> struct std::is_error_code_enum<ringpipe::errc> : std::true_type {};
/// \endcond

#include <ringpipe/opencl.hpp>

template <class F> decltype(auto) ringpipe::cl_call(const char* where, F&& f) {
  try {
    return f();
  } catch (const cl::Error& e) {
    throw_opencl_error(e.err(), where);
  }
}
