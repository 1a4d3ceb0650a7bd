// work_stealing: one kernel replicated on every device as a farm, fed jobs of uneven cost (every
// tenth job costs 20 times the others; dealt in turn, they all land on the same replica), run
// four ways: dealt in turn and left there; dealt to the replica whose queue would drain first
// (by each replica's measured speed); that with stealing (the farm's default); and that told what
// each job costs. Results come back in job order and are checked against the host.
//
//            +-> [queue 0] -> do_job on device 0 -+
//   jobs ----+-> [queue 1] -> do_job on device 1 -+-> merge (job order) -> check
//     deal    (least loaded; a replica whose queue runs dry steals from the one that would drain last)
//
// Run with POCL_DEVICES="pthread pthread" ./work_stealing; add RUSTICL_ENABLE=llvmpipe for a third
// replica on rusticl (a heavy job stays under llvmpipe's 65535 loop iterations per launch).

#include "example_help.hpp"
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

using namespace ringpipe;

struct job {
  std::uint32_t seq, cost, result, pad;
};

const char* const job_source = R"(
#include <ringpipe/stage.clh>
typedef struct { uint seq, cost, result, pad; } job;
inline bool run_job(const job* in, job* out) {
  uint x = in->seq + 1u;
  for (uint k = 0; k < in->cost; ++k) x = x * 1664525u + 1013904223u;
  *out = *in;
  out->result = x;
  return true;
}
RINGPIPE_MAP_KERNEL(do_job, job, job, run_job)
)";

constexpr std::uint32_t jobs = 20000, light = 3000, heavy = 20 * light; // heavy: under llvmpipe's loop limit

std::uint32_t expected(std::uint32_t seq, std::uint32_t cost) {
  std::uint32_t x = seq + 1u;
  for (std::uint32_t k = 0; k < cost; ++k)
    x = x * 1664525u + 1013904223u;
  return x;
}

struct outcome {
  double seconds;
  std::uint64_t wrong;
};

outcome run(runtime& rt, const char* name, const farm_options& o) {
  pipeline p(rt, {.name = name});
  auto source = p.add_source<job>("jobs", [n = 0u]() mutable -> std::optional<job> {
    if (n == jobs) return std::nullopt;
    const std::uint32_t seq = n++;
    return job{seq, seq % 10 == 3 ? heavy : light, 0, 0};
  });
  auto farm = p.add_farm<job, job>("do_job", kernel_spec(job_source, "do_job"), o);
  std::uint64_t wrong = 0;
  auto check = p.add_sink<job>("check", [&wrong, next = 0u](const job& j) mutable {
    wrong += j.seq != next++ || j.result != expected(j.seq, j.cost) ? 1 : 0;
  });
  p.connect(source.out(), farm.in());
  p.connect(farm.out(), check.in());
  const auto t0 = std::chrono::steady_clock::now();
  p.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto m = p.metrics();
  std::printf("%-22s %6.3f s, jobs per replica:", name, seconds);
  for (const auto& s : m.stages)
    if (s.kind == stage_kind::kernel) std::printf(" %llu", static_cast<unsigned long long>(s.msgs_in));
  std::printf(" (measured");
  for (const auto& s : m.stages)
    if (s.kind == stage_kind::kernel)
      std::printf(" %s", s.intake_per_s > 0 ? std::to_string(std::lround(s.intake_per_s)).c_str() : "-");
  std::printf(o.cost ? " cost/s)" : " jobs/s)");
  if (const auto* deal = m.stage("do_job:deal"); deal && o.steal)
    std::printf(", steals: %llu (%llu jobs), rebalances: %llu (%llu jobs)",
                static_cast<unsigned long long>(deal->steals), static_cast<unsigned long long>(deal->stolen),
                static_cast<unsigned long long>(deal->rebalances), static_cast<unsigned long long>(deal->rebalanced));
  std::printf("\n");
  return {seconds, wrong};
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv,
                                       "A farm of uneven jobs: dealt in turn, least loaded, stolen, and by cost.");
      c >= 0)
    return c;
  try {
    runtime rt;
    std::printf("%u jobs, one in ten %ux the cost, on %zu device(s)\n", jobs, heavy / light, rt.devices().size());
    if (rt.devices().size() < 2)
      std::printf("only one device: nothing to steal from (POCL_DEVICES=\"pthread pthread\")\n");
    const auto in_turn = run(rt, "dealt in turn", {.dealing = farm_dealing::in_turn, .steal = false});
    const auto least = run(rt, "dealt least loaded", {.dealing = farm_dealing::least_loaded, .steal = false});
    const auto farm = run(rt, "least loaded, stealing", {});
    const auto costed = run(rt, "told each job's cost", {.cost = item_cost<job>([](const job& j) { return j.cost; })});
    std::printf("against dealing in turn: least loaded %.2fx, with stealing %.2fx, told costs %.2fx faster\n",
                in_turn.seconds / least.seconds, in_turn.seconds / farm.seconds, in_turn.seconds / costed.seconds);
    if (const std::uint64_t wrong = in_turn.wrong + least.wrong + farm.wrong + costed.wrong; wrong != 0) {
      std::printf("FAILED: %llu results wrong or out of order\n", static_cast<unsigned long long>(wrong));
      return 1;
    }
    std::printf("OK: %u jobs four times, every result checked, in order\n", jobs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "work_stealing: %s\n", e.what());
    return 1;
  }
}
