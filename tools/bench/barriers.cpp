// Barrier phases between host threads: ringpipe::barrier (split-phase, completion, timeouts,
// metrics) against std::barrier, the standard library's, in the same run. Time per phase, p50 and
// p99, from one participant's arrive_and_wait to its release.

#include "bench.hpp"

#include <barrier>
#include <thread>

namespace ringpipe::bench {
namespace {

// `threads` participants run `phases` phases through `sync(t)`; participant 0's phase times.
template <class Sync> std::vector<double> phase_times(std::size_t threads, std::uint32_t phases, Sync&& sync) {
  std::vector<double> us;
  us.reserve(phases);
  std::vector<std::thread> others;
  for (std::size_t t = 1; t < threads; ++t)
    others.emplace_back([&, t] {
      for (std::uint32_t k = 0; k < phases; ++k)
        sync(t);
    });
  for (std::uint32_t k = 0; k < phases; ++k) {
    const auto t0 = clock_type::now();
    sync(0);
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  for (auto& o : others)
    o.join();
  return us;
}

} // namespace

void barrier_topic(bench_context& c) {
  if (!c.selected("barrier")) return;
  const std::uint32_t phases = c.s.quick ? 2'000 : 20'000;
  for (const std::size_t threads : {2u, 3u}) {
    std::vector<std::string> names;
    for (std::size_t t = 0; t < threads; ++t)
      names.push_back("host" + std::to_string(t));
    barrier ours(names, {});
    const auto mine = phase_times(threads, phases, [&](std::size_t t) { ours.arrive_and_wait(t); });
    std::barrier theirs(static_cast<std::ptrdiff_t>(threads));
    const auto std_times = phase_times(threads, phases, [&](std::size_t) { theirs.arrive_and_wait(); });
    result r{"barrier",
             {{"participants", std::to_string(threads)}, {"kind", "host"}},
             {{"p50_us", percentile(mine, 0.5)},
              {"p99_us", percentile(mine, 0.99)},
              {"std_barrier_p50_us", percentile(std_times, 0.5)},
              {"std_barrier_p99_us", percentile(std_times, 0.99)}}};
    std::cerr << "  barrier " << threads << " host threads: p50 " << r.metrics["p50_us"] << " us, p99 "
              << r.metrics["p99_us"] << " us (std::barrier p50 " << r.metrics["std_barrier_p50_us"] << " us, p99 "
              << r.metrics["std_barrier_p99_us"] << " us)\n";
    c.results.push_back(std::move(r));
  }
}

} // namespace ringpipe::bench
