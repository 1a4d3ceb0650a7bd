#pragma once
// The one place tests choose devices: a topology discovered from the environment ctest sets
// (POCL_DEVICES, RUSTICL_ENABLE, RINGPIPE_DEVICE_FILTER), and helpers that find a device of a
// platform or report, with GTEST_SKIP, which capability is missing.

#include <ringpipe/runtime.hpp>
#include <ringpipe/topology.hpp>

#include <gtest/gtest.h>

#include <initializer_list>
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

/// A runtime over the environment's devices, shared by the tests of one binary.
class device_test : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (!runtime_) runtime_ = new runtime(topology::discover(), runtime_options{2});
  }
  static runtime& rt() { return *runtime_; }
  static const topology& topo() { return runtime_->devices(); }
  inline static runtime* runtime_ = nullptr; // lives until exit: kernels of every test share it
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
