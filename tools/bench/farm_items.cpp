// Topic `farm_items`: a farm of cheap items (a stream that needs no balancing) over the first two
// devices, ordered and not, against the same stream through one kernel on device 0 in the same
// run: what the farm's host side (dealer, ledger, merger) costs per item where the kernel costs
// little. Sources and sinks take batches, so that the host functions cost the same in both.

#include "bench.hpp"

namespace ringpipe::bench {
namespace {

using msg = test_message<16>;
constexpr std::uint32_t item_mixes = 10; // test_costly_map's work per item

// Items per second from the pipeline's start to its end: a farm on devices 0 and 1 (`farm`), or
// one kernel on device 0.
double items_per_s(runtime& rt, std::uint32_t items, bool farm, bool ordered, const settings& s) {
  pipeline_options options{.name = farm ? (ordered ? "farm-ordered" : "farm-unordered") : "one-kernel"};
  const auto view = watch(s, options);
  pipeline p(rt, options);
  auto src =
      p.add_source_batch<msg>("items", [items, next = 0u](std::span<msg> room) mutable -> std::optional<std::size_t> {
        if (next == items) return std::nullopt;
        const auto n = std::min<std::size_t>(room.size(), items - next);
        for (std::size_t i = 0; i < n; ++i) {
          room[i] = make_test_message<16>(next + static_cast<std::uint32_t>(i));
          room[i].payload[0] = item_mixes;
        }
        next += static_cast<std::uint32_t>(n);
        return n;
      });
  std::uint64_t got = 0, misplaced = 0;
  auto sink = p.add_sink_batch<msg>("check", [&](std::span<const msg> in) {
    for (const auto& m : in) {
      misplaced += (ordered && m.seq != got) || m.check != test_check_after(m.seq, 1) ? 1 : 0;
      ++got;
    }
  });
  const kernel_spec spec(test_stages_source(16), "test_costly_map");
  if (farm) {
    farm_options o;
    o.devices = {0, 1};
    o.ordered = ordered;
    auto f = p.add_farm<msg, msg>("work", spec, o);
    p.connect(src.out(), f.in());
    p.connect(f.out(), sink.in());
  } else {
    auto k = p.add_kernel<msg, msg>("work", spec, on_device(0));
    p.connect(src.out(), k.in());
    p.connect(k.out(), sink.in());
  }
  const auto t0 = clock_type::now();
  p.run(10min);
  const double secs = seconds_since(t0);
  if (got != items || misplaced != 0)
    throw std::runtime_error("farm_items: " + std::to_string(got) + " of " + std::to_string(items) + " results, " +
                             std::to_string(misplaced) + " wrong or out of order");
  if (s.verbose) std::cerr << p.metrics().table();
  return items / secs;
}

} // namespace

void farm_items_topic(bench_context& c) {
  if (!c.selected("farm_items")) return;
  if (c.rt.devices().size() < 2) {
    std::cerr << "  farm_items: needs two devices (POCL_DEVICES=\"pthread pthread\")\n";
    return;
  }
  const std::uint32_t items = c.s.quick ? 200'000 : 2'000'000;
  (void)items_per_s(c.rt, items / 100, true, true, c.s); // builds the kernel on both devices
  // Alternated, best of three: this machine's throughput moves between runs.
  double one = 0, ordered = 0, unordered = 0;
  for (int round = 0; round < 3; ++round) {
    one = std::max(one, items_per_s(c.rt, items, false, true, c.s));
    ordered = std::max(ordered, items_per_s(c.rt, items, true, true, c.s));
    unordered = std::max(unordered, items_per_s(c.rt, items, true, false, c.s));
  }
  c.results.push_back({"farm_items",
                       {{"items", std::to_string(items)}, {"mixes", std::to_string(item_mixes)}, {"devices", "2"}},
                       {{"one_kernel_items_per_s", one},
                        {"farm_ordered_items_per_s", ordered},
                        {"farm_unordered_items_per_s", unordered},
                        {"ordered_over_one_kernel", ordered / one},
                        {"unordered_over_one_kernel", unordered / one}}});
  std::fprintf(stderr,
               "  farm_items %u items of %u mixes: one kernel %.3g items/s | farm on two devices, ordered %.3g (%.3fx) "
               "| unordered %.3g (%.3fx)\n",
               items, item_mixes, one, ordered, ordered / one, unordered, unordered / one);
}

} // namespace ringpipe::bench
