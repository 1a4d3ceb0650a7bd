// Host to one kernel and back: every mode and size, against a launch per message and a host-only ring.

#include "bench.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <span>
#include <thread>

namespace ringpipe::bench {
namespace {

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
  const auto source = resolve_includes(relaunch_baseline_source(N));
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
    // One message at a time, made at the call and checked, as an application loop writes it.
    ring<m16> q(1024);
    const auto t0 = clock_type::now();
    std::thread producer([&] {
      for (std::uint32_t i = 0; i < count; ++i)
        q.push(make_test_message<16>(i), 10s);
    });
    m16 m{};
    for (std::uint32_t i = 0; i < count; ++i)
      if (!q.pop(m, 10s) || m.seq != i || m.check != test_check_after(i, 0))
        throw std::runtime_error("spsc baseline: message " + std::to_string(i) + " lost or wrong");
    producer.join();
    r.metrics["per_message_msgs_per_s"] = count / seconds_since(t0);
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
  std::cerr << "  spsc_baseline: " << r.metrics["msgs_per_s"] << " msgs/s in runs of 64, "
            << r.metrics["per_message_msgs_per_s"] << " msgs/s a message at a time, rtt p50 " << r.metrics["rtt_p50_us"]
            << " us\n";
}

// An application thread blocked in pop, a host thread pushing one message after each 2 ms of
// quiet (the pop has backed off to its longest sleep by then): from push to pop returning, against
// the same hand-over through a mutex and a condition variable, in the same run.
void ring_wake(const settings& s, std::vector<result>& out) {
  const std::uint32_t samples = s.quick ? 60 : 300;
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
  };
  const auto run = [&](auto push, auto pop) {
    std::vector<double> us;
    std::thread producer([&] {
      for (std::uint32_t i = 0; i < samples; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        push(now_ns());
      }
    });
    for (std::uint32_t i = 0; i < samples; ++i) {
      const std::int64_t pushed = pop();
      us.push_back(static_cast<double>(now_ns() - pushed) / 1000.0);
    }
    producer.join();
    return us;
  };
  ring<std::int64_t> q(1024);
  const auto ours = run([&](std::int64_t t) { q.push(t, 10s); },
                        [&] {
                          std::int64_t t = 0;
                          if (!q.pop(t, 10s)) throw std::runtime_error("ring_wake: lost a message");
                          return t;
                        });
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::int64_t> items;
  const auto theirs = run(
      [&](std::int64_t t) {
        {
          std::lock_guard lock(mutex);
          items.push_back(t);
        }
        cv.notify_one();
      },
      [&] {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return !items.empty(); });
        const auto t = items.front();
        items.pop_front();
        return t;
      });
  result r{"ring_wake", {{"quiet_ms", "2"}}, {}};
  r.metrics["ring_p50_us"] = percentile(ours, 0.5), r.metrics["ring_p90_us"] = percentile(ours, 0.9);
  r.metrics["cv_p50_us"] = percentile(theirs, 0.5), r.metrics["cv_p90_us"] = percentile(theirs, 0.9);
  r.metrics["cv_over_ring_p50"] = r.metrics["cv_p50_us"] / r.metrics["ring_p50_us"];
  out.push_back(r);
  std::cerr << "  ring_wake: push to pop after 2 ms of quiet, p50 " << r.metrics["ring_p50_us"] << " us (p90 "
            << r.metrics["ring_p90_us"] << "); a condition variable " << r.metrics["cv_p50_us"] << " us (p90 "
            << r.metrics["cv_p90_us"] << ")\n";
}

// A round's group of 64 work-items (every device's default before device_info::round_group)
// against the device's default, persistent, alternated in one run: this VM's core-to-core latency
// moves 3-4x between periods of a few seconds, and both must see the same ones.
template <std::size_t N> void round_group(bench_context& c) {
  const std::uint32_t groups[2] = {64, c.dev.info().round_group};
  std::vector<double> rate[2], rtt[2];
  const std::uint32_t count = N >= 4096 ? c.s.stream_messages() / 10 : c.s.stream_messages();
  for (int round = 0; round < (c.s.quick ? 2 : 8); ++round) {
    for (int g = 0; g < 2; ++g) {
      kernel_options options;
      options.mode = kernel_mode::persistent;
      options.local_size = groups[g];
      ring<test_message<N>> in(c.dev, 1024, {"in"}), out(c.dev, 1024, {"out"});
      ring_kernel<test_message<N>, test_message<N>> k(c.rt, c.dev, {test_stages_source(N), "test_map", ""}, options);
      k.start(in, out);
      rate[g].push_back(count / stream_through(in, out, k, count));
      rtt[g].push_back(percentile(round_trips(in, out, k, c.s.rtt_samples() / 4), 0.5));
      in.close();
      k.wait(30s);
    }
  }
  result r{"round_group", {{"msg_bytes", std::to_string(N)}, {"default_group", std::to_string(groups[1])}}, {}};
  r.metrics["group64_msgs_per_s"] = percentile(rate[0], 0.5);
  r.metrics["default_msgs_per_s"] = percentile(rate[1], 0.5);
  r.metrics["group64_rtt_p50_us"] = percentile(rtt[0], 0.5);
  r.metrics["default_rtt_p50_us"] = percentile(rtt[1], 0.5);
  c.results.push_back(r);
  std::cerr << "  round_group " << N << " B, medians of alternated runs: group 64 " << r.metrics["group64_msgs_per_s"]
            << " msgs/s, rtt p50 " << r.metrics["group64_rtt_p50_us"] << " us; group " << groups[1] << " "
            << r.metrics["default_msgs_per_s"] << " msgs/s, rtt p50 " << r.metrics["default_rtt_p50_us"] << " us\n";
}

} // namespace

void host_to_kernel_topic(bench_context& c) {
  if (c.selected("host_to_kernel")) {
    host_to_kernel<16>(c.rt, c.dev, c.s, c.results);
    host_to_kernel<64>(c.rt, c.dev, c.s, c.results);
    host_to_kernel<256>(c.rt, c.dev, c.s, c.results);
    host_to_kernel<4096>(c.rt, c.dev, c.s, c.results);
  }
  if (c.selected("round_group")) {
    if (!c.dev.info().supports(kernel_mode::persistent) || c.dev.info().round_group == 64) {
      std::cerr << "  round_group: " << c.dev.name() << " keeps no kernel resident or rounds in groups of 64 already; "
                << "not run\n";
    } else {
      round_group<16>(c);
      round_group<256>(c);
      round_group<4096>(c);
    }
  }
  if (c.selected("host_to_kernel.relaunch_baseline")) {
    relaunch_baseline<16>(c.dev, c.s, c.results);
    relaunch_baseline<64>(c.dev, c.s, c.results);
    relaunch_baseline<256>(c.dev, c.s, c.results);
    relaunch_baseline<4096>(c.dev, c.s, c.results);
  }
  if (c.selected("spsc_baseline")) spsc_baseline(c.s, c.results);
  if (c.selected("ring_wake")) ring_wake(c.s, c.results);
}

} // namespace ringpipe::bench
