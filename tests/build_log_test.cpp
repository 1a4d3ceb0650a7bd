// Build logs point at the user's file and line also where the compiler ignores #line directives
// (NVIDIA's OpenCL reports "<kernel>:LINE:COLUMN" in the composed source). No platform needed.

#include <ringpipe/program.hpp>

#include "../src/core/build_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using ringpipe::detail::log_at_source_lines;

namespace {

// The composed line (1-based) holding `text`.
unsigned composed_line(const std::string& source, const std::string& text) {
  const auto at = source.find(text);
  EXPECT_NE(at, std::string::npos) << text;
  return 1 + static_cast<unsigned>(std::count(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

TEST(BuildLog, AnIgnoredLineDirectiveIsTranslatedToTheUsersFileAndLine) {
  const std::string user =
      "// user kernels\n#include <ringpipe/stage.clh>\n\ninline bool broken(void) { return true }\n";
  const auto source = ringpipe::resolve_includes(user, "my_kernels.cl", {});
  const unsigned line = composed_line(source, "return true }");
  ASSERT_GT(line, 10u) << "the embedded header comes first";
  const std::string log = "<kernel>:" + std::to_string(line) + ":58: error: expected ';' after return statement\n";
  EXPECT_EQ(log_at_source_lines(source, log), "my_kernels.cl:4:58: error: expected ';' after return statement\n");

  // A line of the embedded header names the header.
  const unsigned header_line = composed_line(source, "#line 1 \"ringpipe/stage.clh\"") + 1;
  EXPECT_EQ(log_at_source_lines(source, "<source>:" + std::to_string(header_line) + ": note"),
            "ringpipe/stage.clh:1: note");
}

TEST(BuildLog, LogsThatAlreadyNameFilesAndLinesOutsideTheSourceAreKept) {
  const auto source = ringpipe::resolve_includes("kernel void k(void) {}\n", "a.cl", {});
  const std::string named = "a.cl:1:1: warning: unused\n";
  EXPECT_EQ(log_at_source_lines(source, named), named);
  const std::string beyond = "<kernel>:9999:1: error\n<kernel>:x\n";
  EXPECT_EQ(log_at_source_lines(source, beyond), beyond);
}

} // namespace
