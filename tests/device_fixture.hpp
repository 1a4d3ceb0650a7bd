#pragma once
// The one place tests choose devices: a topology discovered from the environment ctest sets
// (POCL_DEVICES, RUSTICL_ENABLE, RINGPIPE_DEVICE_FILTER), and helpers that find a device of a
// platform or report, with GTEST_SKIP, which capability is missing.

#include <ringpipe/runtime.hpp>
#include <ringpipe/topology.hpp>

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ringpipe::testing {

inline bool is_pocl(const device& d) {
  return d.info().platform.find("Portable Computing Language") != std::string::npos;
}
inline bool is_rusticl(const device& d) { return d.info().platform == "rusticl"; }

/// Index of the first device on which pred holds.
template <class Pred> std::optional<std::size_t> find_device(const topology& t, Pred pred) {
  for (const auto& d : t.devices())
    if (pred(d)) return d.index();
  return std::nullopt;
}

/// A runtime over the environment's devices, shared by the tests of one binary. It is built by
/// the first suite that needs it and destroyed when the tests end, before main returns: left to
/// the exit handlers, its threads could release a kernel's OpenCL objects while the OpenCL
/// implementation is being torn down (seen as a crash at exit under oclgrind).
class shared_runtime : public ::testing::Environment {
public:
  static constexpr unsigned threads = 2;
  static runtime& get() {
    if (!instance_) instance_ = std::make_unique<runtime>(topology::discover(), runtime_options{threads});
    return *instance_;
  }
  void TearDown() override { instance_.reset(); }

private:
  inline static std::unique_ptr<runtime> instance_;
};
inline ::testing::Environment* const shared_runtime_environment =
    ::testing::AddGlobalTestEnvironment(new shared_runtime);

class device_test : public ::testing::Test {
protected:
  static void SetUpTestSuite() { shared_runtime::get(); }
  static runtime& rt() { return shared_runtime::get(); }
  static const topology& topo() { return shared_runtime::get().devices(); }
};

/// Runs `fn`, which must throw ringpipe::error with `code` and a text containing each of `texts`;
/// records the failure `if_returned` if it returns instead.
template <class Fn>
void expect_error(Fn&& fn, std::error_code code, std::initializer_list<std::string_view> texts,
                  const char* if_returned) {
  try {
    fn();
    ADD_FAILURE() << if_returned;
  } catch (const ringpipe::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    const std::string what = e.what();
    for (const auto text : texts)
      EXPECT_NE(what.find(text), std::string::npos) << "no '" << text << "' in: " << what;
  }
}

} // namespace ringpipe::testing

/// Skips the test, naming what the environment lacks, unless `opt` found a device.
#define RINGPIPE_REQUIRE_DEVICE(opt, what)                                                                             \
  if (!(opt)) GTEST_SKIP() << "no " << (what) << " in this environment (see ringpipe-info)"
