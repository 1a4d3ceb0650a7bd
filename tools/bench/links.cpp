// Topic `links`: the copy bandwidth matrix (ringpipe/copy_bandwidth.hpp) for every ordered pair of
// ends at 4 KiB, 1 MiB and 64 MiB, each with a host memcpy of the same size from the same run.

#include "bench.hpp"

namespace ringpipe::bench {

void links_topic(bench_context& c) {
  if (!c.selected("links")) return;
  copy_bandwidth_options o;
  if (c.s.quick) o.budget_bytes = std::size_t{256} << 20;
  const auto ms = measure_copy_bandwidth(c.rt, o);
  for (const auto& m : ms)
    c.results.push_back(
        {"links",
         {{"from", m.from}, {"to", m.to}, {"path", std::string(to_string(m.path))}, {"bytes", std::to_string(m.bytes)}},
         {{"p50_us", m.p50_us},
          {"gb_per_s", m.gb_per_s},
          {"memcpy_gb_per_s", m.memcpy_gb_per_s},
          {"ratio_to_memcpy", m.gb_per_s / m.memcpy_gb_per_s}}});
  std::cerr << copy_bandwidth_table(c.rt, ms);
}

} // namespace ringpipe::bench
