// Two-stage pipelines driven from an inlet to an outlet: kernels (fused and not) against host stages.

#include "bench.hpp"
#include "test_stream.hpp"

#include <span>

namespace ringpipe::bench {
namespace {

// inlet -> stage 1 -> stage 2 -> outlet, driven from this thread: a verified stream, then
// one-message round trips.
template <class Build>
result two_stage(runtime& rt, const char* name, Build build, const settings& s, bool fuse = true) {
  using msg = test_message<16>;
  pipeline_options options;
  options.name = name;
  options.fuse_kernels = fuse;
  // Round trips are what this topic measures: it asks for latency (automatic would run the two
  // unfused kernels batched on a 2-core machine, a launch per message).
  options.objective = pipeline_objective::latency;
  const auto view = watch(s, options);
  pipeline p(rt, options);
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  build(p, in.out(), out.in());
  p.start();
  auto push = p.inlet<msg>("in");
  auto pop = p.outlet<msg>("out");
  result r{name, {{"msg_bytes", "16"}}, {}};
  const std::uint32_t count = s.stream_messages();
  const auto o = testing::stream_test_messages<16>(p, "in", "out", count, 2, std::chrono::minutes(10), 64);
  if (o.received != count || o.wrong != 0)
    throw std::runtime_error(std::string(name) + ": " + std::to_string(o.received) + " of " + std::to_string(count) +
                             " messages arrived, " + std::to_string(o.wrong) + " lost or corrupted");
  r.metrics["msgs_per_s"] = o.rate();
  std::vector<double> us;
  us.reserve(s.rtt_samples());
  for (std::uint32_t i = 0; i < s.rtt_samples(); ++i) {
    msg m = make_test_message<16>(count + i);
    const auto t1 = clock_type::now();
    push.push(m, 10s);
    if (!pop.pop(m, 10s) || m.seq != count + i) throw std::runtime_error(std::string(name) + ": lost a ping");
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t1).count());
  }
  push.close();
  p.wait(60s);
  r.metrics["p50_us"] = percentile(us, 0.50);
  r.metrics["p99_us"] = percentile(us, 0.99);
  r.metrics["p999_us"] = percentile(us, 0.999);
  std::cerr << "  " << name << ": " << r.metrics["msgs_per_s"] << " msgs/s, p50 " << r.metrics["p50_us"] << " us, p99 "
            << r.metrics["p99_us"] << " us\n";
  return r;
}

// The two map kernels are adjacent on one device: fused into one kernel by default. The unfused
// row shows the cost of a second resident kernel (on 2 cores: a third spinning thread).
void pipeline_latency(runtime& rt, const settings& s, std::vector<result>& out) {
  using msg = test_message<16>;
  for (const bool fuse : {true, false}) {
    out.push_back(two_stage(
        rt, "pipeline_latency",
        [](pipeline& p, output_port<msg> from, input_port<msg> to) {
          auto k1 = p.add_kernel<msg, msg>("k1", kernel_spec(test_stages_source(16), "test_map"), on_device(0));
          auto k2 = p.add_kernel<msg, msg>("k2", kernel_spec(test_stages_source(16), "test_map"), on_device(0));
          p.connect(from, k1.in());
          p.connect(k1.out(), k2.in());
          p.connect(k2.out(), to);
        },
        s, fuse));
    out.back().params["fused"] = fuse ? "true" : "false";
  }
}

void asio_baseline(runtime& rt, const settings& s, std::vector<result>& out) {
  using msg = test_message<16>;
  auto step = [](const msg& m) {
    msg r = m;
    r.check = test_mix(m.check ^ m.seq);
    return r;
  };
  out.push_back(two_stage(
      rt, "asio_baseline",
      [&](pipeline& p, output_port<msg> from, input_port<msg> to) {
        auto h1 = p.add_host<msg, msg>("h1", step);
        auto h2 = p.add_host<msg, msg>("h2", step);
        p.connect(from, h1.in());
        p.connect(h1.out(), h2.in());
        p.connect(h2.out(), to);
      },
      s));
}

} // namespace

void pipeline_topic(bench_context& c) {
  if (c.selected("pipeline_latency")) pipeline_latency(c.rt, c.s, c.results);
  if (c.selected("asio_baseline")) asio_baseline(c.rt, c.s, c.results);
}

} // namespace ringpipe::bench
