// ringpipe-bench: throughput and latency of ringpipe's transports, each measured in the same
// process and run as the baselines it is compared to.
//   ringpipe-bench --json FILE [--filter REGEX] [--quick]

#include <ringpipe/detail/json.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/runtime.hpp>
#include <ringpipe/test_message.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <thread>
#include <vector>

using namespace ringpipe;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct result {
  std::string name;
  std::map<std::string, std::string> params;
  std::map<std::string, double> metrics;
};

struct settings {
  bool quick = false;
  bool verbose = false; // print each pipeline's metrics table
  std::uint32_t stream_messages() const { return quick ? 100'000 : 1'000'000; }
  std::uint32_t rtt_samples() const { return quick ? 2'000 : 20'000; }
};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
void add_stream_metrics(result& r, std::uint32_t n, std::size_t bytes, double secs) {
  r.metrics["msgs_per_s"] = n / secs;
  r.metrics["bytes_per_s"] = static_cast<double>(n) * static_cast<double>(bytes) / secs;
}
void add_rtt_metrics(result& r, const std::vector<double>& us) {
  r.metrics["rtt_p50_us"] = percentile(us, 0.50);
  r.metrics["rtt_p99_us"] = percentile(us, 0.99);
}

// host -> in -> kernel -> out -> host, from one thread; verifies every message.
template <std::size_t N>
double stream_through(ring<test_message<N>>& in, ring<test_message<N>>& out, ring_kernel_base& k, std::uint32_t count) {
  std::vector<test_message<N>> batch(64), got(64);
  std::uint32_t sent = 0, received = 0;
  const auto t0 = clock_type::now();
  auto last = t0;
  while (received < count) {
    if (sent < count) {
      const auto n = std::min<std::uint32_t>(count - sent, static_cast<std::uint32_t>(batch.size()));
      for (std::uint32_t i = 0; i < n; ++i)
        batch[i] = make_test_message<N>(sent + i);
      const auto pushed = static_cast<std::uint32_t>(in.push_n(std::span(batch).first(n)));
      if (pushed > 0 && k.mode() != kernel_mode::persistent) k.notify();
      sent += pushed;
    }
    const auto popped = out.pop_n(got);
    for (std::size_t i = 0; i < popped; ++i, ++received) {
      if (got[i].seq != received || got[i].check != test_check_after(received, 1))
        throw std::runtime_error("message " + std::to_string(received) + " lost or corrupted");
    }
    if (popped > 0)
      last = clock_type::now();
    else if (clock_type::now() - last > 20s) {
      if (auto failure = k.failure()) std::rethrow_exception(failure);
      throw std::runtime_error("stream made no progress for 20 s: " + std::to_string(received) + " of " +
                               std::to_string(count) + " received, kernel state " + std::string(to_string(k.state())));
    }
  }
  return seconds_since(t0);
}

template <std::size_t N>
std::vector<double> round_trips(ring<test_message<N>>& in, ring<test_message<N>>& out, ring_kernel_base& k,
                                std::uint32_t samples) {
  std::vector<double> us;
  us.reserve(samples);
  test_message<N> m{};
  for (std::uint32_t s = 0; s < samples; ++s) {
    const auto msg = make_test_message<N>(s);
    const auto t0 = clock_type::now();
    if (!in.try_push(msg)) throw std::runtime_error("input ring full during round trips");
    if (k.mode() != kernel_mode::persistent) k.notify();
    if (!out.pop(m, 10s) || m.seq != s) throw std::runtime_error("round trip lost message " + std::to_string(s));
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return us;
}

template <std::size_t N>
void host_to_kernel_with(runtime& rt, const device& dev, const settings& s, kernel_mode mode, std::uint32_t lanes,
                         std::vector<result>& out) {
  result r{"host_to_kernel",
           {{"msg_bytes", std::to_string(N)}, {"mode", std::string(to_string(mode))}, {"device", dev.name()}},
           {}};
  if (lanes > 0) r.params["staging_lanes"] = std::to_string(lanes);
  kernel_options options;
  options.mode = mode;
  if (lanes > 0) options.staging_lanes = lanes;
  const std::uint32_t count = N >= 4096 ? s.stream_messages() / 10 : s.stream_messages();
  {
    ring<test_message<N>> in(dev, 1024, {"in"}), o(dev, 1024, {"out"});
    ring_kernel<test_message<N>, test_message<N>> k(rt, dev, {test_stages_source(N), "test_map", ""}, options);
    k.start(in, o);
    add_stream_metrics(r, count, N, stream_through(in, o, k, count));
    add_rtt_metrics(r, round_trips(in, o, k, s.rtt_samples() / (mode == kernel_mode::persistent ? 1 : 4)));
    in.close();
    k.notify();
    k.wait(30s);
  }
  out.push_back(r);
  std::cerr << "  host_to_kernel " << N << " B " << to_string(mode);
  if (lanes > 0) std::cerr << " lanes " << lanes;
  std::cerr << ": " << r.metrics["msgs_per_s"] << " msgs/s, rtt p50 " << r.metrics["rtt_p50_us"] << " us\n";
}

template <std::size_t N>
void host_to_kernel(runtime& rt, const device& dev, const settings& s, std::vector<result>& out) {
  const bool mirrored = !(dev.info().svm.fine_buffer && dev.info().svm.atomics);
  for (auto mode : dev.info().modes) {
    if (mode == kernel_mode::batched && mirrored) {
      // Batches through device mirrors: one at a time against double-buffered.
      host_to_kernel_with<N>(rt, dev, s, mode, 1, out);
      host_to_kernel_with<N>(rt, dev, s, mode, 2, out);
    } else {
      host_to_kernel_with<N>(rt, dev, s, mode, 0, out);
    }
  }
}

// One launch and finish per message, through plain buffers.
template <std::size_t N> void relaunch_baseline(const device& dev, const settings& s, std::vector<result>& out) {
  result r{"host_to_kernel.relaunch_baseline", {{"msg_bytes", std::to_string(N)}, {"device", dev.name()}}, {}};
  const auto source =
      resolve_includes("#define RP_MSG_BYTES " + std::to_string(N) + "\n#include <stages/relaunch_baseline.cl>\n");
  auto program = dev.programs().get(dev, source, base_build_options(dev), "relaunch_step");
  cl::Kernel kernel(program, "relaunch_step");
  cl::CommandQueue queue(dev.context(), dev.cl_device());
  cl::Buffer in_buf(dev.context(), CL_MEM_READ_ONLY, N), out_buf(dev.context(), CL_MEM_WRITE_ONLY, N);
  kernel.setArg(0, in_buf);
  kernel.setArg(1, out_buf);
  const auto one = [&](std::uint32_t seq) {
    auto m = make_test_message<N>(seq);
    test_message<N> got{};
    queue.enqueueWriteBuffer(in_buf, CL_FALSE, 0, N, &m);
    queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(1), cl::NDRange(1));
    queue.enqueueReadBuffer(out_buf, CL_TRUE, 0, N, &got);
    if (got.seq != seq || got.check != test_check_after(seq, 1))
      throw std::runtime_error("relaunch baseline: wrong result");
  };
  const std::uint32_t count = s.quick ? 2'000 : 20'000;
  const auto t0 = clock_type::now();
  for (std::uint32_t i = 0; i < count; ++i)
    one(i);
  add_stream_metrics(r, count, N, seconds_since(t0));
  std::vector<double> us;
  for (std::uint32_t i = 0; i < s.rtt_samples() / 4; ++i) {
    const auto t1 = clock_type::now();
    one(i);
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t1).count());
  }
  add_rtt_metrics(r, us);
  out.push_back(r);
  std::cerr << "  relaunch_baseline " << N << " B: " << r.metrics["msgs_per_s"] << " msgs/s, rtt p50 "
            << r.metrics["rtt_p50_us"] << " us\n";
}

// The physical floor: two host threads over a CPU ring.
void spsc_baseline(const settings& s, std::vector<result>& out) {
  using m16 = test_message<16>;
  result r{"spsc_baseline", {{"msg_bytes", "16"}}, {}};
  const std::uint32_t count = s.stream_messages() * 4;
  {
    ring<m16> q(1024);
    const auto t0 = clock_type::now();
    std::thread producer([&] {
      std::vector<m16> batch(64);
      for (std::uint32_t sent = 0; sent < count;) {
        const auto n = std::min<std::uint32_t>(64, count - sent);
        for (std::uint32_t i = 0; i < n; ++i)
          batch[i] = make_test_message<16>(sent + i);
        sent += static_cast<std::uint32_t>(q.push_n(std::span(batch).first(n)));
      }
    });
    std::vector<m16> got(64);
    for (std::uint32_t received = 0; received < count;) {
      const auto n = q.pop_n(got);
      for (std::size_t i = 0; i < n; ++i, ++received)
        if (got[i].seq != received) throw std::runtime_error("spsc baseline: reordered");
    }
    producer.join();
    add_stream_metrics(r, count, 16, seconds_since(t0));
  }
  {
    ring<m16> ping(1), pong(1);
    std::thread echo([&] {
      m16 m{};
      while (ping.pop(m, 30s))
        pong.push(m, 30s);
    });
    std::vector<double> us;
    m16 m{};
    for (std::uint32_t i = 0; i < s.rtt_samples(); ++i) {
      const auto t0 = clock_type::now();
      ping.push(make_test_message<16>(i), 10s);
      if (!pong.pop(m, 10s) || m.seq != i) throw std::runtime_error("spsc baseline: lost ping");
      us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    ping.close();
    echo.join();
    add_rtt_metrics(r, us);
  }
  out.push_back(r);
  std::cerr << "  spsc_baseline: " << r.metrics["msgs_per_s"] << " msgs/s, rtt p50 " << r.metrics["rtt_p50_us"]
            << " us\n";
}

// ---- pipelines (issue: runtime, links) ----

// Messages per stream for an N-byte message: about 160 MB (16 MB quick) of payload, at most 10 M.
std::uint32_t stream_count(std::size_t bytes, const settings& s) {
  const std::size_t budget = s.quick ? (16u << 20) : (160u << 20);
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(budget / bytes, 2000, s.quick ? 1'000'000 : 10'000'000));
}

// A producer kernel on `from` streams to a verifying consumer kernel on `to`; returns msgs/s
// (from start() to the consumer's summary) and the link kind the pipeline used.
template <std::size_t N>
std::pair<double, link_kind> kernel_stream(runtime& rt, std::size_t from, std::size_t to, std::optional<link_kind> kind,
                                           std::uint32_t count, const settings& s) {
  using msg = test_message<N>;
  pipeline_options options;
  options.name = "bench";
  options.capacity = static_cast<std::uint32_t>(std::clamp<std::size_t>((4u << 20) / N, 64, 1024));
  pipeline p(rt, options);
  kernel_spec producer(test_stages_source(N), "test_source");
  producer.args = {kernel_arg::of(count)};
  kernel_spec consumer(test_stages_source(N), "test_verify");
  consumer.state_bytes = sizeof(test_summary);
  consumer.args = {kernel_arg::of(std::uint32_t{0})};
  auto a = p.add_kernel<no_message, msg>("producer", producer, on_device(from));
  auto b = p.add_kernel<msg, test_summary>("consumer", consumer, on_device(to));
  test_summary sum{};
  auto sink = p.add_sink<test_summary>("summary", [&](const test_summary& x) { sum = x; });
  link_options link;
  link.kind = kind;
  p.connect(a.out(), b.in(), link);
  p.connect(b.out(), sink.in());
  const auto t0 = clock_type::now();
  p.run(10min);
  const double secs = seconds_since(t0);
  if (sum.count != count || sum.errors != 0 || sum.sum != test_checksum(count, 0))
    throw std::runtime_error("kernel stream of " + std::to_string(N) + "-byte messages: " + std::to_string(sum.count) +
                             " of " + std::to_string(count) + " arrived, " + std::to_string(sum.errors) + " errors");
  if (s.verbose) std::cerr << p.metrics().table();
  return {count / secs, p.metrics().links[0].kind};
}

template <std::size_t N> void kernel_to_kernel(runtime& rt, const settings& s, std::vector<result>& out) {
  result r{"kernel_to_kernel", {{"msg_bytes", std::to_string(N)}}, {}};
  const auto count = stream_count(N, s);
  const auto [rate, kind] = kernel_stream<N>(rt, 0, 0, std::nullopt, count, s);
  add_stream_metrics(r, 1, N, 1.0 / rate);
  r.params["link"] = std::string(to_string(kind));
  out.push_back(r);
  std::cerr << "  kernel_to_kernel " << N << " B: " << rate << " msgs/s\n";
}

template <std::size_t N> void cross_device(runtime& rt, const settings& s, std::vector<result>& out) {
  if (rt.devices().size() < 2) {
    std::cerr << "  cross_device: needs two devices (POCL_DEVICES=\"pthread pthread\"); not measured\n";
    return;
  }
  for (const auto kind : {link_kind::direct, link_kind::staged}) {
    if (kind == link_kind::direct &&
        !(rt.device_at(0).shares_context_with(rt.device_at(1)) && rt.device_at(0).info().svm.fine_buffer &&
          rt.device_at(1).info().svm.fine_buffer)) {
      std::cerr << "  cross_device direct: devices 0 and 1 share no fine-grained SVM; not measured\n";
      continue;
    }
    result r{"cross_device", {{"msg_bytes", std::to_string(N)}, {"link", std::string(to_string(kind))}}, {}};
    const auto [rate, used] = kernel_stream<N>(rt, 0, 1, kind, stream_count(N, s), s);
    add_stream_metrics(r, 1, N, 1.0 / rate);
    out.push_back(r);
    std::cerr << "  cross_device " << N << " B " << to_string(used) << ": " << rate << " msgs/s\n";
  }
}

// inlet -> stage 1 -> stage 2 -> outlet, driven from this thread: a verified stream, then
// one-message round trips.
template <class Build>
result two_stage(runtime& rt, const char* name, Build build, const settings& s, bool fuse = true) {
  using msg = test_message<16>;
  pipeline_options options;
  options.name = name;
  options.fuse_kernels = fuse;
  pipeline p(rt, options);
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  build(p, in.out(), out.in());
  p.start();
  auto push = p.inlet<msg>("in");
  auto pop = p.outlet<msg>("out");
  result r{name, {{"msg_bytes", "16"}}, {}};
  const std::uint32_t count = s.stream_messages();
  std::vector<msg> batch(64), got(64);
  std::uint32_t sent = 0, received = 0;
  const auto t0 = clock_type::now();
  while (received < count) {
    if (sent < count) {
      const auto n = std::min<std::uint32_t>(count - sent, 64);
      for (std::uint32_t i = 0; i < n; ++i)
        batch[i] = make_test_message<16>(sent + i);
      sent += static_cast<std::uint32_t>(push.push_n(std::span(batch).first(n)));
    }
    const auto popped = pop.pop_n(got);
    for (std::size_t i = 0; i < popped; ++i, ++received)
      if (got[i].seq != received || got[i].check != test_check_after(received, 2))
        throw std::runtime_error(std::string(name) + ": message " + std::to_string(received) + " lost or corrupted");
    if (auto f = p.failure()) std::rethrow_exception(f);
  }
  r.metrics["msgs_per_s"] = count / seconds_since(t0);
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

void write_json(const std::string& path, const std::vector<result>& results) {
  std::ofstream f(path);
  f << "{\"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    f << (i ? "," : "") << "\n  {\"name\": " << detail::json_string(r.name) << ", \"params\": {";
    bool first = true;
    for (const auto& [k, v] : r.params)
      f << (first ? "" : ", ") << detail::json_string(k) << ": " << detail::json_string(v), first = false;
    f << "}, \"metrics\": {";
    first = true;
    for (const auto& [k, v] : r.metrics)
      f << (first ? "" : ", ") << detail::json_string(k) << ": " << detail::json_number(v), first = false;
    f << "}}";
  }
  f << "\n]}\n";
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path, filter = ".*";
  settings s;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      s.quick = true;
    else if (!std::strcmp(argv[i], "--verbose"))
      s.verbose = true;
    else {
      std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose]\n";
      return 2;
    }
  }
  if (json_path.empty()) {
    std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick] [--verbose]\n";
    return 2;
  }
  const std::regex want(filter);
  const auto selected = [&](const char* name) { return std::regex_search(name, want); };
  try {
    runtime rt;
    const auto& dev = rt.device_at(0);
    std::cerr << "ringpipe-bench on " << dev.label() << (s.quick ? " (quick)" : "") << "\n";
    std::vector<result> results;
    if (selected("host_to_kernel")) {
      host_to_kernel<16>(rt, dev, s, results);
      host_to_kernel<64>(rt, dev, s, results);
      host_to_kernel<256>(rt, dev, s, results);
      host_to_kernel<4096>(rt, dev, s, results);
    }
    if (selected("host_to_kernel.relaunch_baseline")) {
      relaunch_baseline<16>(dev, s, results);
      relaunch_baseline<64>(dev, s, results);
      relaunch_baseline<256>(dev, s, results);
      relaunch_baseline<4096>(dev, s, results);
    }
    if (selected("spsc_baseline")) spsc_baseline(s, results);
    if (selected("kernel_to_kernel")) {
      kernel_to_kernel<16>(rt, s, results);
      kernel_to_kernel<256>(rt, s, results);
    }
    if (selected("cross_device")) {
      cross_device<16>(rt, s, results);
      cross_device<256>(rt, s, results);
      cross_device<4096>(rt, s, results);
      cross_device<65536>(rt, s, results);
    }
    if (selected("pipeline_latency")) pipeline_latency(rt, s, results);
    if (selected("asio_baseline")) asio_baseline(rt, s, results);
    write_json(json_path, results);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ringpipe-bench: " << e.what() << "\n";
    return 1;
  }
}
