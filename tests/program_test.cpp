#include <ringpipe/kernel.hpp>
#include <ringpipe/program.hpp>
#include <test_message.hpp>

#include "device_fixture.hpp"
#include "ring_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace ringpipe;
using namespace std::chrono_literals;

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

// A stopped kernel's objects go back to the program cache's shelf and serve the next kernel of
// that name (creating them costs milliseconds on rusticl); the next runs with its own arguments,
// and one it leaves unset is refused as ever, not taken from the last user.
TEST_F(program_test, TheNextKernelOfANameTakesTheShelvedObjectsWithItsOwnArguments) {
  const auto& dev = topo()[0];
  const auto& cache = dev.programs();
  // A program of its own, so that no earlier test's kernels are on the shelf.
  const kernel_spec spec{test_stages_source(16) + "\n// shelf test\n", "test_fail_at", ""};
  const auto before = cache.shelved();
  const auto run = [&](std::uint32_t fail_at, std::uint32_t messages) {
    ring<ringpipe::testing::msg16> in(dev, 16, {"in"}), out(dev, 16, {"out"});
    ring_kernel<ringpipe::testing::msg16, ringpipe::testing::msg16> k(rt(), dev, spec);
    EXPECT_EQ(cache.shelved(), before + 1) << "only the kernel that reads the declared sizes is shelved meanwhile";
    k.set_arg(0, fail_at);
    k.start(in, out);
    if (fail_at < messages) {
      for (std::uint32_t s = 0; s < messages; ++s)
        in.push(make_test_message<16>(s), 5s);
      k.notify();
      EXPECT_THROW(k.wait(20s), ringpipe::error);
      EXPECT_EQ(out.size(), fail_at);
    } else {
      ringpipe::testing::stream(in, out, messages, k);
      EXPECT_EQ(k.stats().msgs_out, messages) << "it ran with its own argument, not the last kernel's";
    }
  };
  run(3, 5);
  ASSERT_EQ(cache.shelved(), before + 2) << "the stopped kernel's object, shelved";
  run(0xffffffffu, 1'000); // takes that object: the count above stays
  ASSERT_EQ(cache.shelved(), before + 2) << "taken and shelved again, not a second one";
  ring<ringpipe::testing::msg16> in(dev, 16, {"in"}), out(dev, 16, {"out"});
  ring_kernel<ringpipe::testing::msg16, ringpipe::testing::msg16> unset(rt(), dev, spec);
  EXPECT_EQ(cache.shelved(), before + 1);
  ringpipe::testing::expect_error([&] { unset.start(in, out); }, make_error_code(errc::invalid_argument), {"not set"},
                                  "a kernel with its argument unset started");
}

} // namespace
