// Topic `work_stealing`: a farm of test_costly_map on the first two devices over a skewed stream
// (one item in ten costs 20x; dealt in turn they all land on one replica). Makespan with stealing
// against static dealing (the same farm, items left where dealt), and against the ideal: the
// total work over the summed speed of each device running the stream alone, all in this run. On a
// CPU-only machine the devices share the host's cores, so that ideal counts the cores twice.

#include "bench.hpp"

namespace ringpipe::bench {
namespace {

using msg = test_message<16>;

double makespan(runtime& rt, std::vector<std::size_t> devices, bool steal, std::uint32_t items, std::uint64_t* steals,
                const settings& s) {
  pipeline_options options{.name = steal ? "work_stealing" : "static_dealing"};
  const auto view = watch(s, options);
  pipeline p(rt, options);
  auto src = p.add_source<msg>("items", [items, next = 0u]() mutable -> std::optional<msg> {
    if (next == items) return std::nullopt;
    auto m = make_test_message<16>(next);
    m.payload[0] = next % 10 == 3 ? 40000u : 2000u;
    ++next;
    return m;
  });
  farm_options o;
  o.devices = std::move(devices);
  o.steal = steal;
  auto farm = p.add_farm<msg, msg>("work", kernel_spec(test_stages_source(16), "test_costly_map"), o);
  std::uint32_t bad = 0;
  auto sink = p.add_sink<msg>("check", [&bad, next = 0u](const msg& m) mutable {
    bad += m.seq != next || m.check != test_check_after(m.seq, 1) ? 1 : 0;
    ++next;
  });
  p.connect(src.out(), farm.in());
  p.connect(farm.out(), sink.in());
  const auto t0 = clock_type::now();
  p.run();
  const double secs = seconds_since(t0);
  if (bad != 0) throw std::runtime_error("work_stealing: " + std::to_string(bad) + " results wrong or out of order");
  if (steals)
    for (const auto& st : p.metrics().stages)
      if (st.kind == stage_kind::dealer) *steals = st.steals;
  return secs;
}

} // namespace

void work_stealing_topic(bench_context& c) {
  if (!c.selected("work_stealing")) return;
  if (c.rt.devices().size() < 2) {
    std::cerr << "  work_stealing: needs two devices (POCL_DEVICES=\"pthread pthread\")\n";
    return;
  }
  const std::uint32_t items = c.s.quick ? 5000 : 20000;
  const std::size_t runs = c.s.quick ? 1 : 3;
  std::vector<double> alone;
  for (std::size_t d = 0; d < 2; ++d) {
    std::vector<double> t;
    for (std::size_t r = 0; r < runs; ++r)
      t.push_back(makespan(c.rt, {d}, true, items, nullptr, c.s));
    alone.push_back(percentile(t, 0.5));
  }
  std::vector<double> stat, steal;
  std::uint64_t steals = 0;
  for (std::size_t r = 0; r < runs; ++r) {
    stat.push_back(makespan(c.rt, {0, 1}, false, items, nullptr, c.s));
    steal.push_back(makespan(c.rt, {0, 1}, true, items, &steals, c.s));
  }
  const double ideal = 1.0 / (1.0 / alone[0] + 1.0 / alone[1]); // the work split by speed
  const double s = percentile(steal, 0.5), d = percentile(stat, 0.5);
  c.results.push_back({"work_stealing.farm",
                       {{"items", std::to_string(items)}, {"devices", "2"}},
                       {{"stealing_s", s},
                        {"static_s", d},
                        {"alone_0_s", alone[0]},
                        {"alone_1_s", alone[1]},
                        {"ideal_s", ideal},
                        {"static_over_stealing", d / s},
                        {"stealing_over_ideal", s / ideal},
                        {"steals", static_cast<double>(steals)}}});
  std::fprintf(stderr,
               "  work_stealing %u items: stealing %.3f s | static %.3f s (%.2fx) | alone %.3f / %.3f s | ideal %.3f s "
               "(stealing %.2fx of it) | %llu steals\n",
               items, s, d, d / s, alone[0], alone[1], ideal, s / ideal, static_cast<unsigned long long>(steals));
}

} // namespace ringpipe::bench
