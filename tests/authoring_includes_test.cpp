// Kernel sources that include the user's own files: resolved next to the file and in include
// directories, and errors that name the user's file and line. Part of authoring_test (the same
// runs on every device of the environment).

#include <ringpipe/pipeline.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/runtime.hpp>

#include "authoring_items.hpp"
#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;
using ringpipe::testing::item;
using ringpipe::testing::items;

namespace {

class UserFilesTest : public ringpipe::testing::device_test {};

// A scratch directory with the user's kernel files, removed at the end.
class user_files {
public:
  user_files() : root_(std::filesystem::temp_directory_path() / ("ringpipe-authoring-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(root_ / "kernels");
    std::filesystem::create_directories(root_ / "shared");
  }
  ~user_files() { std::filesystem::remove_all(root_); }
  user_files(const user_files&) = delete;
  user_files& operator=(const user_files&) = delete;
  std::string write(const std::string& relative, const std::string& text) const {
    const auto path = root_ / relative;
    std::ofstream(path) << text;
    return path.string();
  }
  std::string dir(const std::string& relative) const { return (root_ / relative).string(); }

private:
  std::filesystem::path root_;
};

// "item.h" sits next to the kernel file; "shared/affine.h" is found through an include directory.
TEST_F(UserFilesTest, UserIncludesResolveNextToTheFileAndInIncludeDirs) {
  user_files files;
  files.write("kernels/item.h", "typedef struct { uint seq; uint value; } item;\n");
  files.write("shared/affine.h", "#include \"item.h\"\ninline bool plus2(const item* in, item* out) {\n"
                                 "  *out = *in; out->value += 2; return true;\n}\n");
  const auto main =
      files.write("kernels/main.cl", "#include <ringpipe/stage.clh>\n#include \"item.h\"\n"
                                     "#include \"affine.h\"\nRINGPIPE_MAP_KERNEL(plus2_map, item, item, plus2)\n");
  auto spec = kernel_spec::from_file(main, "plus2_map");
  EXPECT_EQ(spec.source_name, main);
  // affine.h's own "item.h" is looked for next to it first, then in the include directories.
  spec.include_dirs.push_back(files.dir("shared"));
  pipeline p(rt(), {"includes"});
  auto src = p.add_source<item>("source", items(1000));
  auto k = p.add_kernel<item, item>("plus2", spec);
  std::uint32_t expected = 0, wrong = 0;
  auto sink = p.add_sink<item>("sink", [&](const item& m) {
    if (m.seq != expected++ || m.value != m.seq + 2) ++wrong;
  });
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.run(2min);
  EXPECT_EQ(expected, 1000u);
  EXPECT_EQ(wrong, 0u);
}

TEST_F(UserFilesTest, ErrorInAnIncludedUserFileNamesThatFileAndLine) {
  user_files files;
  const auto header = files.write("kernels/bad.h", "// line 1\n// line 2\ninline int broken(void) { return 1 }\n");
  const auto main = files.write("kernels/main.cl", "#include <ringpipe/stage.clh>\n#include \"bad.h\"\n");
  pipeline p(rt(), {"bad-include"});
  auto src = p.add_source<item>("source", items(1));
  auto k = p.add_kernel<item, item>("k", kernel_spec::from_file(main, "whatever"));
  auto sink = p.add_sink<item>("sink", [](const item&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  try {
    p.start();
    FAIL() << "a kernel with a syntax error built";
  } catch (const build_error& e) {
    EXPECT_NE(e.build_log().find(header + ":3:"), std::string::npos) << e.build_log();
  }
}

TEST_F(UserFilesTest, MissingIncludeNamesTheLineAndWhereItLooked) {
  user_files files;
  const auto main = files.write("kernels/main.cl", "// one\n#include \"absent.h\"\n");
  const auto spec = kernel_spec::from_file(main, "k");
  expect_error([&] { (void)resolve_includes(spec.source, spec.source_name, spec.include_dirs); },
               make_error_code(errc::invalid_argument),
               {main + ":2: cannot find included file 'absent.h'", files.dir("kernels"), "ringpipe/stage.clh"},
               "a missing include resolved");
  expect_error([&] { (void)kernel_spec::from_file(files.dir("kernels/none.cl"), "k"); },
               make_error_code(errc::invalid_argument), {"cannot read its source file", "none.cl"},
               "a missing file was read");
}

} // namespace
