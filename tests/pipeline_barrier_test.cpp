// Barriers over a pipeline's stages (add_barrier): two kernel stages on two PoCL devices and a
// host thread move in lock step, the barrier holds the kernels until the host arrives, its
// counters are in the pipeline's metrics, and members that are not kernel stages are refused in
// start() with nothing launched.
#include <ringpipe/pipeline_barrier.hpp>
#include <ringpipe/runtime.hpp>

#include "device_fixture.hpp"
#include "test_message.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

struct phase_item {
  std::uint32_t seq, phase, tag, pad;
};

class PipelineBarrier : public ringpipe::testing::device_test {
protected:
  // Devices 0 and 1 when both are PoCL devices sharing SVM with atomics.
  bool two_shared() {
    if (topo().size() < 2) return false;
    for (std::size_t i = 0; i < 2; ++i)
      if (!ringpipe::testing::is_pocl(topo()[i]) || !topo()[i].info().svm.fine_buffer || !topo()[i].info().svm.atomics)
        return false;
    return true;
  }
  static kernel_spec phased(std::uint32_t tag) {
    kernel_spec spec(test_phases_source(), "test_phased_stage");
    spec.args = {kernel_arg::of(tag)};
    return spec;
  }
  static auto items(std::uint32_t count) {
    return [count, next = std::uint32_t{0}]() mutable -> std::optional<phase_item> {
      if (next == count) return std::nullopt;
      return phase_item{next++, 0, 0, 0};
    };
  }
};

TEST_F(PipelineBarrier, TwoKernelStagesAndAHostThreadMoveInLockStep) {
  if (!two_shared()) GTEST_SKIP() << "needs two PoCL devices sharing SVM (POCL_DEVICES=\"pthread pthread\")";
  constexpr std::uint32_t phases = 200;
  pipeline p(rt(), {"phased"});
  std::atomic<std::uint32_t> seen[2] = {0, 0};
  std::atomic<std::uint32_t> wrong{0}, completions{0};
  for (std::uint32_t side = 0; side < 2; ++side) {
    const std::string n = side == 0 ? "left" : "right";
    auto src = p.add_source<phase_item>(n + "-in", items(phases));
    auto k = p.add_kernel<phase_item, phase_item>(n, phased(side), on_device(side));
    auto sink = p.add_sink<phase_item>(n + "-out", [&, side](const phase_item& m) {
      if (m.seq != seen[side] || m.phase != m.seq || m.tag != side) wrong.fetch_add(1);
      seen[side].fetch_add(1);
    });
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
  }
  barrier_options options;
  options.name = "phases";
  options.on_phase = [&](std::uint32_t phase) {
    if (phase != completions.load()) wrong.fetch_add(1);
    completions.fetch_add(1);
  };
  auto b = add_barrier(p, {barrier_member::stage("left", 1), barrier_member::stage("right", 1), "driver"}, options);
  expect_error([&] { (void)b.get(); }, make_error_code(errc::invalid_pipeline),
               {"pipeline 'phased'", "barrier 'phases'", "once the pipeline started"}, "a barrier before start()");
  p.start();
  const auto driver = b->participant("driver");
  // Each kernel emits message 0 and waits at phase 0 for the driver: nothing more passes.
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(seen[0].load(), 1u);
  EXPECT_LE(seen[1].load(), 1u);
  for (std::uint32_t k = 0; k < phases; ++k)
    b->arrive_and_wait(driver);
  p.wait(60s);
  EXPECT_EQ(seen[0].load(), phases);
  EXPECT_EQ(seen[1].load(), phases);
  EXPECT_EQ(completions.load(), phases);
  EXPECT_EQ(wrong.load(), 0u);
  const auto m = p.metrics();
  ASSERT_EQ(m.barriers.size(), 1u);
  EXPECT_EQ(m.barriers[0].name, "phases");
  EXPECT_EQ(m.barriers[0].phases, phases);
  ASSERT_EQ(m.barriers[0].participants.size(), 3u);
  for (const auto& member : m.barriers[0].participants)
    EXPECT_EQ(member.arrivals, phases) << member.name;
  EXPECT_TRUE(m.barriers[0].participants[0].on_device);
  EXPECT_FALSE(m.barriers[0].participants[2].on_device);
  EXPECT_NE(m.table().find("barrier 'phases': 200 phases"), std::string::npos) << m.table();
  EXPECT_NE(m.json().find("\"barriers\": [{\"name\": \"phases\", \"phases\": 200"), std::string::npos) << m.json();
}

TEST_F(PipelineBarrier, MembersThatAreNotKernelStagesAreRefusedInStart) {
  struct refusal {
    barrier_member member;
    std::vector<std::string> says;
  };
  const std::vector<refusal> cases = {
      {barrier_member::stage("nope", 1),
       {"pipeline 'refused'", "barrier 'b'", "stage 'nope' does not exist", "its kernel stages: 'left'"}},
      {barrier_member::stage("left-out", 1), {"barrier 'b'", "stage 'left-out' is not a ring kernel", "sink"}},
      {barrier_member::stage("left", 5), {"barrier 'b'", "no argument 5"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.member.name);
    pipeline p(rt(), {"refused"});
    auto src = p.add_source<phase_item>("left-in", items(10));
    auto k = p.add_kernel<phase_item, phase_item>("left", phased(0), on_device(0));
    std::atomic<std::uint32_t> delivered{0};
    auto sink = p.add_sink<phase_item>("left-out", [&](const phase_item&) { delivered.fetch_add(1); });
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
    barrier_options options;
    options.name = "b";
    auto b = add_barrier(p, {c.member, "driver"}, options);
    try {
      p.start();
      ADD_FAILURE() << "a barrier over a member that is not a kernel stage started";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), c.member.name == "left" ? make_error_code(errc::invalid_argument)
                                                  : make_error_code(errc::invalid_pipeline))
          << e.what();
      for (const auto& text : c.says)
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << "no '" << text << "' in: " << e.what();
    }
    EXPECT_EQ(delivered.load(), 0u) << "nothing ran";
  }
}

// A kernel stage of a barrier that never gets its seat would wait at an unset argument: the
// pipeline refuses it, naming the argument, when no barrier binds it.
TEST_F(PipelineBarrier, AKernelWhoseSeatNoBarrierBindsIsRefused) {
  pipeline p(rt(), {"unbound"});
  auto src = p.add_source<phase_item>("in", items(10));
  auto k = p.add_kernel<phase_item, phase_item>("left", phased(0), on_device(0));
  auto sink = p.add_sink<phase_item>("out", [](const phase_item&) {});
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  expect_error([&] { p.start(); }, make_error_code(errc::invalid_argument),
               {"pipeline 'unbound'", "stage 'left'", "not set: 1"}, "a kernel with its seat unset");
}

} // namespace
