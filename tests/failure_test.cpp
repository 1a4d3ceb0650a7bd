// Failure paths as an application sees them: a thread blocked on a pipeline's ring learns of a
// stop or a failure at once, with an error that names it, not after its own timeout.

#include <ringpipe/pipeline.hpp>

#include <test_message.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using msg = test_message<16>;
using clock_type = std::chrono::steady_clock;

class FailureTest : public ringpipe::testing::device_test {};

struct outcome {
  std::error_code code;
  std::string what;
  clock_type::time_point at;
};

// Runs `fn` on a thread of its own and returns what it threw, and when.
template <class Fn> std::future<outcome> blocked_in(Fn fn) {
  return std::async(std::launch::async, [fn]() mutable {
    try {
      fn();
      return outcome{{}, "returned", clock_type::now()};
    } catch (const ringpipe::error& e) {
      return outcome{e.code(), e.what(), clock_type::now()};
    }
  });
}

TEST_F(FailureTest, StopReleasesAThreadBlockedInPopWithinMilliseconds) {
  pipeline p(rt(), {"quiet"});
  auto in = p.add_inlet<msg>("in");
  auto pass = p.add_host<msg, msg>("pass", [](const msg& m) { return m; });
  auto out = p.add_outlet<msg>("out");
  p.connect(in.out(), pass.in());
  p.connect(pass.out(), out.in());
  p.start();
  auto outlet = p.outlet<msg>("out");
  auto popped = blocked_in([&] {
    msg m{};
    (void)outlet.pop(m, 15s);
  });
  std::this_thread::sleep_for(100ms); // the thread is in pop(), nothing will come
  const auto stopped_at = clock_type::now();
  (void)p.stop();
  ASSERT_EQ(popped.wait_for(5s), std::future_status::ready) << "pop() still blocked 5 s after stop()";
  const auto o = popped.get();
  EXPECT_EQ(o.code, make_error_code(errc::cancelled)) << o.what;
  EXPECT_NE(o.what.find("pop from ring 'pass.out->out.in' ended: pipeline 'quiet' was stopped"), std::string::npos)
      << o.what;
  EXPECT_LT(o.at - stopped_at, 100ms);
}

TEST_F(FailureTest, StopReleasesAThreadBlockedInPushWithinMilliseconds) {
  pipeline p(rt(), {"full"});
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  link_options small;
  small.capacity = 4;
  p.connect(in.out(), out.in(), small);
  p.start();
  auto inlet = p.inlet<msg>("in");
  for (std::uint32_t s = 0; s < 4; ++s)
    ASSERT_TRUE(inlet.try_push(make_test_message<16>(s)));
  auto pushed = blocked_in([&] { inlet.push(make_test_message<16>(4), 15s); });
  std::this_thread::sleep_for(100ms);
  const auto stopped_at = clock_type::now();
  const auto report = p.stop();
  ASSERT_EQ(pushed.wait_for(5s), std::future_status::ready) << "push() still blocked 5 s after stop()";
  const auto o = pushed.get();
  EXPECT_EQ(o.code, make_error_code(errc::cancelled)) << o.what;
  EXPECT_NE(o.what.find("push to ring 'in.out->out.in' ended: pipeline 'full' was stopped"), std::string::npos)
      << o.what;
  EXPECT_LT(o.at - stopped_at, 100ms);
  EXPECT_EQ(report.undelivered, 4u) << report.text();
}

TEST_F(FailureTest, UpstreamKernelFailureReleasesAPopNamingTheStage) {
  pipeline p(rt(), {"faulting"});
  auto in = p.add_inlet<msg>("in");
  auto spec = kernel_spec(test_stages_source(16), "test_fail_at");
  spec.args = {kernel_arg::of(std::uint32_t{5})};
  auto faulty = p.add_kernel<msg, msg>("faulty", spec);
  auto out = p.add_outlet<msg>("out");
  p.connect(in.out(), faulty.in());
  p.connect(faulty.out(), out.in());
  p.start();
  auto inlet = p.inlet<msg>("in");
  auto outlet = p.outlet<msg>("out");
  std::uint32_t received = 0;
  auto popped = blocked_in([&] {
    msg m{};
    while (outlet.pop(m, 15s))
      ++received;
  });
  for (std::uint32_t s = 0; s < 10; ++s)
    inlet.push(make_test_message<16>(s), 5s);
  // The application does not call wait(): the failure must reach the popping thread regardless.
  const auto deadline = clock_type::now() + 10s;
  while (!p.failure() && clock_type::now() < deadline)
    std::this_thread::sleep_for(100us);
  const auto failed_at = clock_type::now();
  ASSERT_TRUE(p.failure()) << "the kernel did not fail";
  ASSERT_EQ(popped.wait_for(5s), std::future_status::ready) << "pop() still blocked 5 s after the failure";
  const auto o = popped.get();
  EXPECT_EQ(o.code, make_error_code(errc::cancelled)) << o.what;
  EXPECT_NE(o.what.find("pipeline 'faulting': stage 'faulty' failed"), std::string::npos) << o.what;
  EXPECT_NE(o.what.find("error code 42"), std::string::npos) << o.what;
  EXPECT_LT(o.at - failed_at, 100ms);
  // Messages before the fault may arrive (PoCL's resident kernel passes them on one by one; a
  // rusticl batch returns them with the fault); a cancelled ring hands out nothing more.
  EXPECT_LE(received, 5u);
}

// A pipeline with one kernel stage built from `spec`, started.
void start_one_kernel(pipeline& p, const kernel_spec& spec) {
  auto src = p.add_source<msg>("src", [] { return std::optional<msg>{}; });
  auto k = p.add_kernel<msg, msg>("k", spec);
  auto sink = p.add_sink<msg>("sink", [](const msg&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.start();
}

TEST_F(FailureTest, BuildErrorFromStartIsABuildErrorWithItsLogAndStage) {
  pipeline p(rt(), {"broken"});
  try {
    start_one_kernel(p, kernel_spec("#include <ringpipe/stage.clh>\n__kernel void oops( {\n", "oops"));
    FAIL() << "a kernel that does not compile was built";
  } catch (const build_error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::build_failed));
    EXPECT_EQ(e.kernel_name(), "oops");
    EXPECT_FALSE(e.build_log().empty());
    EXPECT_NE(std::string(e.what()).find("pipeline 'broken': stage 'k': kernel 'oops' failed to build"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FailureTest, SyntaxErrorIsReportedAtTheUsersFileAndLine) {
  pipeline p(rt(), {"typo"});
  kernel_spec spec("#include <ringpipe/stage.clh>\n" // line 1
                   "typedef struct { uint seq; uint check; uint pad[2]; } m16;\n"
                   "inline bool step(const m16* in, m16* out) { *out = *in; return true; }\n"
                   "inline bool broken(const m16* in, m16* out) { return true }\n" // line 4: no ';'
                   "RINGPIPE_MAP_KERNEL(typo, m16, m16, step)\n",
                   "typo");
  spec.source_name = "my_kernels.cl";
  try {
    start_one_kernel(p, spec);
    FAIL() << "a kernel with a syntax error was built";
  } catch (const build_error& e) {
    EXPECT_NE(e.build_log().find("my_kernels.cl:4:"), std::string::npos) << e.build_log();
    EXPECT_EQ(e.build_log().find("ring.clh:"), std::string::npos) << "blamed on an included header: " << e.build_log();
  }
}

TEST_F(FailureTest, KernelNameTheProgramLacksIsSaidAsSuchWithTheNamesItHas) {
  pipeline p(rt(), {"misnamed"});
  ringpipe::testing::expect_error([&] { start_one_kernel(p, kernel_spec(test_stages_source(16), "test_mapp")); },
                                  make_error_code(errc::invalid_argument),
                                  {"pipeline 'misnamed': stage 'k': kernel 'test_mapp' is not defined by its program",
                                   "which defines:", "test_map", "test_fail_at"},
                                  "a kernel name the program lacks was accepted");
}

TEST_F(FailureTest, OutletAskedForAsAnInletSaysWhatItIs) {
  pipeline p(rt(), {"ports"});
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  p.connect(in.out(), out.in());
  p.start();
  ringpipe::testing::expect_error([&] { (void)p.inlet<msg>("out"); }, make_error_code(errc::invalid_argument),
                                  {"stage 'out' is an outlet, not an inlet"}, "an outlet was handed out as an inlet");
  (void)p.stop();
}

} // namespace
