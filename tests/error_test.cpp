#include <ringpipe/error.hpp>

#include <gtest/gtest.h>

using namespace ringpipe;

namespace {

TEST(OpenclCategory, NamesStatusCodes) {
  EXPECT_STREQ(opencl_error_name(CL_INVALID_KERNEL_NAME), "CL_INVALID_KERNEL_NAME");
  EXPECT_STREQ(opencl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_STREQ(opencl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_STREQ(opencl_error_name(-12345), "CL_UNKNOWN_ERROR");
  EXPECT_EQ(std::error_code(-46, opencl_category()).message(), "CL_INVALID_KERNEL_NAME (-46)");
}

TEST(OpenclError, SaysWhichCallFailed) {
  try {
    throw_opencl_error(CL_INVALID_KERNEL_NAME, "clCreateKernel");
  } catch (const ringpipe::error& e) {
    EXPECT_STREQ(e.what(), "CL_INVALID_KERNEL_NAME (-46) in clCreateKernel");
    EXPECT_EQ(e.code().category(), opencl_category());
    EXPECT_EQ(e.code().value(), CL_INVALID_KERNEL_NAME);
    return;
  }
  FAIL();
}

TEST(OpenclError, NoPlatformSaysWhatToInstall) {
  try {
    throw_opencl_error(-1001, "clGetPlatformIDs");
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::no_platform));
    EXPECT_NE(std::string(e.what()).find("install pocl-opencl-icd"), std::string::npos);
    return;
  }
  FAIL();
}

TEST(BuildError, CarriesKernelNameAndLog) {
  const build_error e("scale", "cpu0", "input.cl:3:1: error: expected ';'");
  EXPECT_EQ(e.kernel_name(), "scale");
  EXPECT_EQ(e.build_log(), "input.cl:3:1: error: expected ';'");
  EXPECT_EQ(e.code(), make_error_code(errc::build_failed));
  const std::string what = e.what();
  EXPECT_NE(what.find("kernel 'scale'"), std::string::npos);
  EXPECT_NE(what.find("expected ';'"), std::string::npos);
}

TEST(RingpipeCategory, ConditionsHaveNames) {
  EXPECT_EQ(make_error_code(errc::timeout).message(), "timed out");
  EXPECT_STREQ(ringpipe_category().name(), "ringpipe");
}

} // namespace
