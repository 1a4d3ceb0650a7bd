// Topic `work_stealing`: a farm of test_costly_map on the first two devices over a skewed stream
// (one item in ten costs 20x; dealt in turn they all land on one replica). Makespan of the farm as
// it comes (dealt least loaded, with stealing) against static dealing (in turn, items left where
// dealt), against each half alone (least loaded without stealing; in turn with stealing), against
// the farm told each item's cost (its feeds ordered by cost, and not), and against the ideal: the
// total work over the summed speed of each device running the stream alone (as it comes, and told
// costs: the ideal for the farm told costs), all in this run, after a run on each device that
// builds its kernel. Where the CPU devices share the host's cores (cpu_cores.hpp), that ideal
// counts the cores twice; the run says which. Dealt in turn, the costly items (every tenth, from
// the fourth) all fall on the second replica's turns; the farm, dealing in turn with stealing, and
// each device alone (their ideal) run again over a stream whose costly items fall on both (seq % 20
// of 3 or 8, one in ten as before).

#include "bench.hpp"

#include <array>

namespace ringpipe::bench {
namespace {

using msg = test_message<16>;

struct farm_shape {
  const char* name;
  farm_dealing dealing;
  bool steal;
  bool by_cost = false;    // the farm is told each item's cost (its mix count)
  bool grouped = true;     // told costs, it feeds its replicas in order of cost
  bool both_turns = false; // the costly items fall on both replicas' turns
};
constexpr farm_shape as_it_comes{"work_stealing", farm_dealing::least_loaded, true};
constexpr farm_shape static_dealing{"static_dealing", farm_dealing::in_turn, false};
constexpr farm_shape least_loaded_alone{"least_loaded", farm_dealing::least_loaded, false};
constexpr farm_shape stealing_alone{"in_turn_stealing", farm_dealing::in_turn, true};
constexpr farm_shape by_cost{"least_loaded_by_cost", farm_dealing::least_loaded, true, true};
constexpr farm_shape by_cost_as_dealt{"by_cost_fed_as_dealt", farm_dealing::least_loaded, true, true, false};
constexpr farm_shape both_turns{"work_stealing_both_turns", farm_dealing::least_loaded, true, false, true, true};
constexpr farm_shape in_turn_both_turns{"in_turn_stealing_both_turns", farm_dealing::in_turn, true, false, true, true};

// One item in ten costs 20x: seq % 10 == 3 (dealt in turn, all on the second replica's turns),
// or seq % 20 of 3 or 8 (half on each).
bool costly(std::uint32_t seq, bool both_turns) { return both_turns ? seq % 20 == 3 || seq % 20 == 8 : seq % 10 == 3; }

/// What a farm's dealer moved between its replicas' queues.
struct farm_moves {
  std::uint64_t steals = 0, stolen = 0, rebalances = 0, rebalanced = 0;
};

double makespan(runtime& rt, std::vector<std::size_t> devices, farm_shape shape, std::uint32_t items, farm_moves* moves,
                const settings& s) {
  pipeline_options options{.name = shape.name};
  const auto view = watch(s, options);
  pipeline p(rt, options);
  auto src = p.add_source<msg>("items", [items, both = shape.both_turns, next = 0u]() mutable -> std::optional<msg> {
    if (next == items) return std::nullopt;
    auto m = make_test_message<16>(next);
    m.payload[0] = costly(next, both) ? 40000u : 2000u;
    ++next;
    return m;
  });
  farm_options o;
  o.devices = std::move(devices);
  o.dealing = shape.dealing;
  o.steal = shape.steal;
  if (shape.by_cost) o.cost = item_cost<msg>([](const msg& m) { return m.payload[0]; });
  o.group_by_cost = shape.grouped;
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
  if (s.verbose) std::fprintf(stderr, "%s (%.3f s)\n%s", shape.name, secs, p.metrics().table().c_str());
  if (moves)
    for (const auto& st : p.metrics().stages)
      if (st.kind == stage_kind::dealer) *moves = {st.steals, st.stolen, st.rebalances, st.rebalanced};
  return secs;
}

/// Makespans of `runs` runs of one shape on `devices`, their median.
double median_makespan(bench_context& c, const std::vector<std::size_t>& devices, farm_shape shape, std::uint32_t items,
                       std::size_t runs, farm_moves* moves = nullptr) {
  std::vector<double> t;
  for (std::size_t r = 0; r < runs; ++r)
    t.push_back(makespan(c.rt, devices, shape, items, moves, c.s));
  return percentile(t, 0.5);
}

// Unequal devices (PoCL x2 + rusticl here): the farm on all of them, dealt least loaded or in
// turn, with stealing, and static dealing.
void every_device(bench_context& c, std::uint32_t items, std::size_t runs) {
  std::vector<std::size_t> all;
  for (std::size_t d = 0; d < c.rt.devices().size(); ++d)
    all.push_back(d);
  std::vector<double> least, in_turn, stat;
  for (std::size_t r = 0; r < runs; ++r) {
    stat.push_back(makespan(c.rt, all, static_dealing, items, nullptr, c.s));
    in_turn.push_back(makespan(c.rt, all, stealing_alone, items, nullptr, c.s));
    least.push_back(makespan(c.rt, all, as_it_comes, items, nullptr, c.s));
  }
  const double l = percentile(least, 0.5), t = percentile(in_turn, 0.5), d = percentile(stat, 0.5);
  c.results.push_back({"work_stealing.every_device",
                       {{"items", std::to_string(items)}, {"devices", std::to_string(all.size())}},
                       {{"least_loaded_stealing_s", l},
                        {"in_turn_stealing_s", t},
                        {"static_s", d},
                        {"in_turn_over_least_loaded", t / l},
                        {"static_over_least_loaded", d / l}}});
  std::fprintf(stderr,
               "  work_stealing on %zu devices: least loaded, stealing %.3f s | in turn, stealing %.3f s (%.2fx) | "
               "static %.3f s (%.2fx)\n",
               all.size(), l, t, t / l, d, d / l);
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
  // A first run builds each device's kernel (rusticl's build is a tenth of a second or more).
  for (std::size_t d = 0; d < 2; ++d)
    (void)makespan(c.rt, {d}, as_it_comes, items / 10, nullptr, c.s);
  std::array<double, 2> alone{}, alone_by_cost{}, alone_both{};
  for (std::size_t d = 0; d < 2; ++d) {
    alone[d] = median_makespan(c, {d}, as_it_comes, items, runs);
    alone_by_cost[d] = median_makespan(c, {d}, by_cost, items, runs);
    alone_both[d] = median_makespan(c, {d}, both_turns, items, runs);
  }
  std::vector<double> stat, steal, dealt, in_turn, costed, as_dealt, steal_both, in_turn_both;
  farm_moves moves;
  for (std::size_t r = 0; r < runs; ++r) {
    stat.push_back(makespan(c.rt, {0, 1}, static_dealing, items, nullptr, c.s));
    steal.push_back(makespan(c.rt, {0, 1}, as_it_comes, items, &moves, c.s));
    dealt.push_back(makespan(c.rt, {0, 1}, least_loaded_alone, items, nullptr, c.s));
    in_turn.push_back(makespan(c.rt, {0, 1}, stealing_alone, items, nullptr, c.s));
    costed.push_back(makespan(c.rt, {0, 1}, by_cost, items, nullptr, c.s));
    as_dealt.push_back(makespan(c.rt, {0, 1}, by_cost_as_dealt, items, nullptr, c.s));
    steal_both.push_back(makespan(c.rt, {0, 1}, both_turns, items, nullptr, c.s));
    in_turn_both.push_back(makespan(c.rt, {0, 1}, in_turn_both_turns, items, nullptr, c.s));
  }
  // The work split by speed: each device's share ends when the other's does.
  const auto ideal_of = [](const std::array<double, 2>& a) { return 1.0 / (1.0 / a[0] + 1.0 / a[1]); };
  const double ideal = ideal_of(alone), ideal_by_cost = ideal_of(alone_by_cost), ideal_both = ideal_of(alone_both);
  const double s = percentile(steal, 0.5), d = percentile(stat, 0.5);
  const double l = percentile(dealt, 0.5), t = percentile(in_turn, 0.5), k = percentile(costed, 0.5);
  const double u = percentile(as_dealt, 0.5);
  const double sb = percentile(steal_both, 0.5), tb = percentile(in_turn_both, 0.5);
  // Whether the ideal counts shared cores twice (cpu_cores.hpp).
  const auto cores = cpu_devices_core_use({&c.rt.device_at(0), &c.rt.device_at(1)}, c.rt.host_cores());
  c.results.push_back({"work_stealing.farm",
                       {{"items", std::to_string(items)}, {"devices", "2"}, {"cpu_devices", cores.describe()}},
                       {{"stealing_s", s},
                        {"static_s", d},
                        {"least_loaded_s", l},
                        {"in_turn_stealing_s", t},
                        {"by_cost_s", k},
                        {"by_cost_fed_as_dealt_s", u},
                        {"alone_0_s", alone[0]},
                        {"alone_1_s", alone[1]},
                        {"alone_by_cost_0_s", alone_by_cost[0]},
                        {"alone_by_cost_1_s", alone_by_cost[1]},
                        {"ideal_s", ideal},
                        {"ideal_by_cost_s", ideal_by_cost},
                        {"static_over_stealing", d / s},
                        {"stealing_over_ideal", s / ideal},
                        {"by_cost_over_ideal_by_cost", k / ideal_by_cost},
                        {"fed_as_dealt_over_by_cost", u / k},
                        {"stealing_both_turns_s", sb},
                        {"in_turn_stealing_both_turns_s", tb},
                        {"ideal_both_turns_s", ideal_both},
                        {"stealing_both_turns_over_ideal", sb / ideal_both},
                        {"in_turn_over_stealing", t / s},
                        {"in_turn_over_stealing_both_turns", tb / sb},
                        {"steals", static_cast<double>(moves.steals)},
                        {"stolen", static_cast<double>(moves.stolen)},
                        {"rebalanced", static_cast<double>(moves.rebalanced)}}});
  if (c.rt.devices().size() > 2) every_device(c, items, runs);
  std::fprintf(stderr,
               "  work_stealing %u items: farm (least loaded, stealing) %.3f s | static %.3f s (%.2fx) | least loaded "
               "alone %.3f s | in turn, stealing %.3f s | alone %.3f / %.3f s | ideal %.3f s (farm %.2fx of it) | "
               "%llu steals moved %llu, %llu rebalances moved %llu (the last run)\n"
               "  told costs: fed in order of cost %.3f s | fed as dealt %.3f s (%.2fx) | alone %.3f / %.3f s | "
               "ideal %.3f s (farm %.2fx of it)\n  costly items on both replicas' turns: farm %.3f s | in turn, "
               "stealing %.3f s (%.2fx the farm; %.2fx where they all fall on one replica's turns) | ideal %.3f s "
               "(farm %.2fx of it)\n  %s%s\n",
               items, s, d, d / s, l, t, alone[0], alone[1], ideal, s / ideal,
               static_cast<unsigned long long>(moves.steals), static_cast<unsigned long long>(moves.stolen),
               static_cast<unsigned long long>(moves.rebalances), static_cast<unsigned long long>(moves.rebalanced), k,
               u, u / k, alone_by_cost[0], alone_by_cost[1], ideal_by_cost, k / ideal_by_cost, sb, tb, tb / sb, t / s,
               ideal_both, sb / ideal_both, cores.describe().c_str(),
               cores.shared() ? " (each alone had them all: the ideal counts them twice)" : "");
}

} // namespace ringpipe::bench
