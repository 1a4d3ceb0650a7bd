// Failure paths as an application sees them: a thread blocked on a pipeline's ring learns of a
// stop or a failure at once, with an error that names it, not after its own timeout.

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "../src/core/slow_step.hpp"

#include <test_message.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <regex>
#include <thread>
#include <vector>

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

TEST_F(FailureTest, StopReportNamesAStagedLinkAsDeclared) {
  pipeline p(rt(), {"report"});
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  link_options staged;
  staged.kind = link_kind::staged; // two rings and a host mover behind one declared link
  p.connect(in.out(), out.in(), staged);
  p.start();
  auto inlet = p.inlet<msg>("in");
  for (std::uint32_t s = 0; s < 20; ++s)
    inlet.push(make_test_message<16>(s), 5s);
  const auto report = p.stop();
  EXPECT_EQ(report.undelivered, 20u) << report.text();
  ASSERT_EQ(report.rings.size(), 1u) << report.text();
  EXPECT_EQ(report.rings[0].ring, "in.out->out.in") << "the user's link, not the mover's rings: " << report.text();
}

// After a kernel faults mid-stream, every message the source produced is delivered, waits in a
// ring, or is reported lost by the failed stage (the one its kernel held when it faulted).
TEST_F(FailureTest, StopReportAfterAFaultAccountsForEveryMessage) {
  std::atomic<std::uint32_t> generated{0}, delivered{0};
  pipeline_options options;
  options.name = "fault-report";
  options.capacity = 64;
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", [&]() -> std::optional<msg> { return make_test_message<16>(generated++); });
  auto spec = kernel_spec(test_stages_source(16), "test_fail_at");
  spec.args = {kernel_arg::of(std::uint32_t{300})};
  auto faulty = p.add_kernel<msg, msg>("faulty", spec);
  auto sink = p.add_sink<msg>("sink", [&](const msg&) { delivered.fetch_add(1); });
  p.connect(src.out(), faulty.in());
  p.connect(faulty.out(), sink.in());
  p.start();
  ringpipe::testing::expect_error([&] { p.wait(60s); }, make_error_code(errc::kernel_fault),
                                  {"stage 'faulty' failed", "error code 42"}, "the faulting kernel finished");
  const auto report = p.stop();
  EXPECT_EQ(delivered.load() + report.undelivered + report.lost, generated.load())
      << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
  EXPECT_LE(delivered.load(), 300u) << "nothing after the faulting one";
  EXPECT_EQ(report.lost, 1u) << report.text();
  ASSERT_EQ(report.lost_in.size(), 1u) << report.text();
  EXPECT_EQ(report.lost_in[0].stage, "faulty");
  EXPECT_NE(report.text().find("1 lost in stage 'faulty' (held by it when it failed)"), std::string::npos)
      << report.text();
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

// The same for host functions, which take runs of messages: one that throws mid-run loses only
// the message it threw on (reported by name); the rest of its run stays queued.
TEST_F(FailureTest, StopReportAfterAHostFunctionThrowsAccountsForEveryMessage) {
  for (const bool in_sink : {false, true}) {
    SCOPED_TRACE(in_sink ? "sink throws" : "transform throws");
    std::atomic<std::uint32_t> generated{0}, delivered{0};
    pipeline p(rt(), {"host-throw"});
    auto src = p.add_source<msg>("source", [&]() -> std::optional<msg> { return make_test_message<16>(generated++); });
    auto boom = [in_sink](const msg& m) {
      if (m.seq == 300 && !in_sink) throw std::runtime_error("boom at 300");
      return m;
    };
    auto mid = p.add_host<msg, msg>("mid", boom);
    auto sink = p.add_sink<msg>("sink", [&, in_sink](const msg& m) {
      if (m.seq == 300 && in_sink) throw std::runtime_error("boom at 300");
      delivered.fetch_add(1);
    });
    p.connect(src.out(), mid.in());
    p.connect(mid.out(), sink.in());
    p.start();
    const auto thrower = in_sink ? "sink" : "mid";
    ringpipe::testing::expect_error([&] { p.wait(60s); }, make_error_code(errc::stage_failed), {"boom at 300"},
                                    "the throwing stage finished");
    const auto report = p.stop();
    EXPECT_EQ(delivered.load() + report.undelivered + report.lost, generated.load())
        << report.text() << "; generated " << generated.load() << ", delivered " << delivered.load();
    EXPECT_LE(delivered.load(), 300u) << "nothing after the one it threw on";
    ASSERT_EQ(report.lost_in.size(), 1u) << report.text();
    EXPECT_EQ(report.lost_in[0].stage, thrower);
    EXPECT_EQ(report.lost, 1u);
  }
}

// start() cannot bound a driver's compile, but it says what it is waiting for: every build as it
// begins with slow_step_after = 0, and a step still running after slow_step_after.
TEST_F(FailureTest, StartSaysWhichBuildItIsWaitingFor) {
  std::mutex mutex;
  std::vector<std::string> notices;
  runtime_options options;
  options.notice = [&](std::string_view text) {
    std::lock_guard lock(mutex);
    notices.emplace_back(text);
  };
  options.slow_step_after = 0ms;
  {
    runtime verbose(topology::discover(), options);
    pipeline p(verbose, {"noisy"});
    auto src = p.add_source<msg>("source", [n = 0u]() mutable -> std::optional<msg> {
      if (n == 10) return std::nullopt;
      return make_test_message<16>(n++);
    });
    auto k = p.add_kernel<msg, msg>("mapper", {test_stages_source(16), "test_map"});
    auto sink = p.add_sink<msg>("sink", [](const msg&) {});
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
    p.run(2min);
  }
  options.slow_step_after = 1ms;
  {
    runtime slow(topology::discover(), options);
    detail::slow_step step(slow, "waiting for the test");
    std::this_thread::sleep_for(200ms);
  }
  std::lock_guard lock(mutex);
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_NE(notices[0].find("pipeline 'noisy': stage 'mapper': building kernel 'test_map' on device"),
            std::string::npos)
      << notices[0];
  EXPECT_EQ(notices[1], "waiting for the test: still waiting after 0 s");
}

// A kernel stuck in an endless loop (OpenCL cannot kill it): the failure is thrown from wait()
// once the stall is seen, stop() and the destructors give up on it within give_up_after, and the
// process still exits. Run as a child process, so that the stuck worker dies with it. On devices
// that run batches through mirrors (rusticl: llvmpipe cuts every loop short, so nothing hangs
// there) the child's batches are reported stalled while they still run, which must not hold up
// the runtime's destructor either.
TEST_F(FailureTest, NeverReturningKernelDoesNotHoldUpWaitStopDestructorsOrExit) {
  const bool hang = ringpipe::testing::is_pocl(topo()[0]);
  const auto t0 = clock_type::now();
  std::string out;
  const std::string command =
      std::string("timeout 60 " STUCK_KERNEL_CHILD " ") + (hang ? "hang" : "slow") + " 2>&1; echo \"exit $?\"";
  FILE* child = popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, child)) > 0;)
    out.append(buf, n);
  pclose(child);
  EXPECT_LT(clock_type::now() - t0, 20s) << out;
  EXPECT_NE(out.find("exit 0"), std::string::npos) << "the process did not exit cleanly:\n" << out;
  const auto took = [&](const char* what) {
    std::smatch m;
    const std::regex re(std::string(what) + " (\\d+) ms");
    return std::regex_search(out, m, re) ? std::stol(m[1]) : -1L;
  };
  // stall_timeout 500 ms + 1 s; give_up_after 500 ms (+ slack for a loaded machine) each.
  EXPECT_GE(took("wait threw after"), 0) << out;
  EXPECT_LT(took("wait threw after"), 1500) << out;
  EXPECT_LT(took("stop took"), 1000) << out;
  EXPECT_LT(took("pipeline destructor took"), 1000) << out;
  EXPECT_LT(took("runtime destructor took"), 1000) << out;
  EXPECT_GE(took("runtime destructor took"), 0) << out;
  EXPECT_NE(out.find("stage 'stuck' failed"), std::string::npos) << out;
  const auto expected = hang ? "never returned; its device objects are left allocated" : "stalled";
  EXPECT_NE(out.find(expected), std::string::npos) << out;
}

} // namespace
