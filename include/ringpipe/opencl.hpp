#pragma once
// The one place ringpipe includes OpenCL-CLHPP. The CL_HPP_* configuration comes from the
// ringpipe target's compile definitions, so every consumer sees the same wrappers.
#if !defined(CL_HPP_ENABLE_EXCEPTIONS) || !defined(CL_HPP_TARGET_OPENCL_VERSION)
#error "link against ringpipe::ringpipe, which sets the CL_HPP_* definitions"
#endif
#include <CL/opencl.hpp>
