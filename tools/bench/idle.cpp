// What a started pipeline costs while no message comes: the process's CPU time and context
// switches over a quiet second, for each kind of stage that waits, beside the same process with
// no pipeline started (the baseline: the runtime's idle io threads); and while no message leaves
// (`full: ...`: nobody pops the outlet, every ring of the pipeline full). A resident kernel spins on
// its device by design (the latency objective's choice): its row says what that costs.

#include "bench.hpp"

#include <sys/resource.h>

#include <thread>

namespace ringpipe::bench {
namespace {

using msg = test_message<16>;

struct process_use {
  double cpu_s = 0;
  long switches = 0;
  static process_use now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return {static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec),
            u.ru_nvcsw + u.ru_nivcsw};
  }
};

// `quiet` runs for the measured second (it sleeps, or blocks in a pop that times out).
template <class Quiet> result measure_quiet(const char* shape, const std::string& plan_line, Quiet quiet) {
  std::this_thread::sleep_for(300ms); // the stages back off and settle
  const auto before = process_use::now();
  const auto t0 = clock_type::now();
  quiet();
  const double wall = seconds_since(t0);
  const auto after = process_use::now();
  result r{"idle", {{"shape", shape}, {"plan", plan_line}}, {}};
  r.metrics["cpu_percent_of_a_core"] = 100 * (after.cpu_s - before.cpu_s) / wall;
  r.metrics["switches_per_s"] = static_cast<double>(after.switches - before.switches) / wall;
  std::cerr << "  idle, " << shape << ": " << r.metrics["cpu_percent_of_a_core"] << "% of a core, "
            << r.metrics["switches_per_s"] << " context switches/s\n";
  return r;
}

// The plan's line for the stage between inlet and outlet (its mode, its re-polls).
std::string stage_line(const std::string& plan) {
  for (std::size_t at = 0; at < plan.size();) {
    const auto end = std::min(plan.find('\n', at), plan.size());
    auto line = plan.substr(at, end - at);
    if (line.starts_with("kernel ") || line.starts_with("host ")) return line;
    at = end + 1;
  }
  return "";
}

// inlet -> `stage` -> outlet, started: `body(push, pop, plan line)` measures it, then its stream
// ends and it stops.
template <class Stage, class Body> result with_pipeline(runtime& rt, const std::string& name, Stage stage, Body body) {
  pipeline_options options;
  options.name = name;
  pipeline p(rt, options);
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  stage(p, in.out(), out.in());
  p.start();
  auto push = p.inlet<msg>("in");
  auto pop = p.outlet<msg>("out");
  auto r = body(push, pop, stage_line(p.plan()));
  push.close();
  (void)p.stop();
  return r;
}

// A few messages through, then quiet; `pop_while_quiet`: the application waits in the outlet's
// pop all along instead of sleeping.
template <class Stage>
result quiet_pipeline(runtime& rt, const char* shape, Stage stage, bool pop_while_quiet = false) {
  return with_pipeline(rt, std::string("idle ") + shape, stage, [&](auto& push, auto& pop, const std::string& plan) {
    for (std::uint32_t s = 0; s < 3; ++s) {
      push.push(make_test_message<16>(s), 10s);
      msg m{};
      if (!pop.pop(m, 10s) || m.seq != s) throw std::runtime_error(std::string("idle ") + shape + ": lost a message");
    }
    return measure_quiet(shape, plan, [&] {
      if (!pop_while_quiet) {
        std::this_thread::sleep_for(1s);
        return;
      }
      msg m{};
      std::error_code ec;
      if (pop.pop(m, 1s, ec)) throw std::runtime_error(std::string("idle ") + shape + ": a message came from nowhere");
    });
  });
}

// Held full: the application pushes until every ring is full and the push times out, then the
// quiet second, with the application asleep or blocked in a push (`push_while_quiet`); then
// every message comes out once, in order.
template <class Stage>
result full_pipeline(runtime& rt, const char* shape, Stage stage, bool push_while_quiet = false) {
  return with_pipeline(rt, std::string("full ") + shape, stage, [&](auto& push, auto& pop, const std::string& plan) {
    std::uint32_t pushed = 0;
    std::error_code ec;
    while (push.push(make_test_message<16>(pushed), 100ms, ec))
      ++pushed;
    auto r = measure_quiet(shape, plan, [&] {
      if (!push_while_quiet) {
        std::this_thread::sleep_for(1s);
        return;
      }
      if (push.push(make_test_message<16>(pushed), 1s, ec)) ++pushed; // room came: a stage moved late
    });
    r.metrics["messages_held"] = pushed;
    for (std::uint32_t s = 0; s < pushed; ++s) {
      msg m{};
      if (!pop.pop(m, 10s) || m.seq != s)
        throw std::runtime_error(std::string("full ") + shape + ": message " + std::to_string(s) +
                                 " lost or out of order");
    }
    return r;
  });
}

kernel_spec map_spec() { return {test_stages_source(16), "test_map", ""}; }

auto kernel_in(kernel_mode mode) {
  return [mode](pipeline& p, output_port<msg> from, input_port<msg> to) {
    kernel_options o;
    o.mode = mode;
    auto k = p.add_kernel<msg, msg>("map", map_spec(), on_device(0), o);
    p.connect(from, k.in());
    p.connect(k.out(), to);
  };
}

} // namespace

void idle_topic(bench_context& c) {
  if (!c.selected("idle")) return;
  c.results.push_back(measure_quiet("nothing started", "", [] { std::this_thread::sleep_for(1s); }));
  auto host = [](pipeline& p, output_port<msg> from, input_port<msg> to) {
    auto h = p.add_host<msg, msg>("pass", [](const msg& m) { return m; });
    p.connect(from, h.in());
    p.connect(h.out(), to);
  };
  c.results.push_back(quiet_pipeline(c.rt, "host stage", host));
  c.results.push_back(quiet_pipeline(c.rt, "application blocked in pop", host, true));
  for (const auto mode : {kernel_mode::batched, kernel_mode::parked, kernel_mode::persistent}) {
    if (!c.dev.info().supports(mode)) continue;
    const std::string shape = std::string(to_string(mode)) + " kernel";
    c.results.push_back(quiet_pipeline(c.rt, shape.c_str(), kernel_in(mode)));
  }
  // A parked kernel's launches write its rings on the device: between launches, only host calls.
  const bool parked = c.dev.info().supports(kernel_mode::parked);
  if (parked)
    c.results.push_back(
        quiet_pipeline(c.rt, "parked kernel, application blocked in pop", kernel_in(kernel_mode::parked), true));
  // Held by backpressure: nobody pops the outlet.
  c.results.push_back(full_pipeline(c.rt, "full: host stage", host));
  c.results.push_back(full_pipeline(c.rt, "full: application blocked in push", host, true));
  for (const auto mode : {kernel_mode::batched, kernel_mode::parked}) {
    if (!c.dev.info().supports(mode)) continue;
    const std::string shape = "full: " + std::string(to_string(mode)) + " kernel";
    c.results.push_back(full_pipeline(c.rt, shape.c_str(), kernel_in(mode)));
  }
  if (parked) {
    c.results.push_back(
        full_pipeline(c.rt, "full: parked kernel, application blocked in push", kernel_in(kernel_mode::parked), true));
  }
}

} // namespace ringpipe::bench
