#include <ringpipe/program.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

using namespace ringpipe;

namespace {

using program_test = ringpipe::testing::device_test;

TEST_F(program_test, SyntaxErrorReportsKernelNameAndCompilerLine) {
  const auto& dev = topo()[0];
  const std::string source = "__kernel void broken(__global int* p) {\n  p[0] = 1\n}\n";
  try {
    (void)dev.programs().get(dev, source, base_build_options(dev), "broken");
    FAIL() << "a kernel with a syntax error built";
  } catch (const build_error& e) {
    EXPECT_EQ(e.kernel_name(), "broken");
    EXPECT_EQ(e.code(), make_error_code(errc::build_failed));
    const std::string what = e.what();
    EXPECT_NE(what.find("kernel 'broken' failed to build"), std::string::npos) << what;
    EXPECT_NE(e.build_log().find("error"), std::string::npos) << e.build_log();
    EXPECT_NE(e.build_log().find(":2:"), std::string::npos) << "the log names line 2: " << e.build_log();
  }
}

TEST_F(program_test, IncludesResolveToEmbeddedSources) {
  const auto text = resolve_includes("#include <ringpipe/stage.clh>\n#include <ringpipe/ring.clh>\nint x;\n");
  EXPECT_NE(text.find("typedef struct"), std::string::npos);
  EXPECT_NE(text.find("RINGPIPE_MAP_KERNEL"), std::string::npos);
  // ring.clh is pulled in by stage.clh once, and not again by the second include.
  const auto first = text.find("#define RP_HEADER_BYTES");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(text.find("#define RP_HEADER_BYTES", first + 1), std::string::npos);
  EXPECT_FALSE(embedded_source("stages/test_map.cl").has_value()) << "test kernels are not shipped";
  EXPECT_FALSE(embedded_source("no/such.cl").has_value());
}

TEST_F(program_test, LinesOfTheUsersSourceKeepTheirFileAndNumberAfterIncludes) {
  const auto text = resolve_includes("// one\n#include <ringpipe/ring.clh>\n// three\n", "user.cl");
  EXPECT_EQ(text.rfind("#line 1 \"user.cl\"\n", 0), 0u) << "the source starts as user.cl, line 1";
  EXPECT_NE(text.find("#line 1 \"ringpipe/ring.clh\""), std::string::npos);
  EXPECT_NE(text.find("#line 3 \"user.cl\"\n// three"), std::string::npos) << text.substr(text.size() - 80);
}

TEST_F(program_test, UnknownIncludeIsRefused) {
  try {
    (void)resolve_includes("#include <missing/header.clh>\n");
    FAIL();
  } catch (const ringpipe::error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/header.clh"), std::string::npos);
  }
}

TEST_F(program_test, CacheBuildsOncePerSourceOptionsAndDevice) {
  const auto& dev = topo()[0];
  auto& cache = dev.programs();
  const auto before = cache.size();
  const std::string source = "__kernel void cached_once(__global int* p) { p[0] = 7; }\n";
  const auto a = cache.get(dev, source, base_build_options(dev), "cached_once");
  const auto b = cache.get(dev, source, base_build_options(dev), "cached_once");
  EXPECT_EQ(a(), b());
  EXPECT_EQ(cache.size(), before + 1);
  const auto c = cache.get(dev, source, base_build_options(dev) + " -DOTHER=1", "cached_once");
  EXPECT_NE(a(), c());
  EXPECT_EQ(cache.size(), before + 2);
}

} // namespace
