// ringpipe-bench: throughput and latency of ringpipe's transports, each measured in the same
// process and run as the baselines it is compared to.
//   ringpipe-bench --json FILE [--filter REGEX] [--quick]

#include <ringpipe/detail/json.hpp>
#include <ringpipe/kernel.hpp>
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
    else if (clock_type::now() - last > 20s)
      throw std::runtime_error("stream made no progress for 20 s");
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
void host_to_kernel(runtime& rt, const device& dev, const settings& s, std::vector<result>& out) {
  for (auto mode : dev.info().modes) {
    result r{"host_to_kernel",
             {{"msg_bytes", std::to_string(N)}, {"mode", std::string(to_string(mode))}, {"device", dev.name()}},
             {}};
    kernel_options options;
    options.mode = mode;
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
    std::cerr << "  host_to_kernel " << N << " B " << to_string(mode) << ": " << r.metrics["msgs_per_s"]
              << " msgs/s, rtt p50 " << r.metrics["rtt_p50_us"] << " us\n";
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
    else {
      std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick]\n";
      return 2;
    }
  }
  if (json_path.empty()) {
    std::cerr << "usage: ringpipe-bench --json FILE [--filter REGEX] [--quick]\n";
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
    write_json(json_path, results);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ringpipe-bench: " << e.what() << "\n";
    return 1;
  }
}
