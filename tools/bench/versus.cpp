// ringpipe against the program a user would write by hand without it: CLHPP, 1 MiB batches, two
// batches in flight per device, non-blocking enqueues and events, one launch per batch. Same
// kernel function (rp_test_step), every output verified, both measured in this run; reported as
// ratios (ringpipe / hand-written for throughput, hand-written / ringpipe for the round trips).

#include "bench.hpp"
#include "test_stream.hpp"

#include <array>
#include <iomanip>
#include <optional>
#include <span>
#include <thread>

namespace ringpipe::bench {
namespace {

constexpr std::size_t batch_bytes = std::size_t{1} << 20;

// One device's part of the hand-written program: its kernel, queue and two slots of buffers.
template <std::size_t N> class handwritten_hop {
public:
  handwritten_hop(const device& dev, std::size_t per_batch) {
    const auto source = resolve_includes(relaunch_baseline_source(N));
    const auto program = dev.programs().get(dev, source, base_build_options(dev), "batch_step");
    kernel_ = cl::Kernel(program, "batch_step");
    queue_ = cl::CommandQueue(dev.context(), dev.cl_device());
    for (auto& s : slots_) {
      s.in = cl::Buffer(dev.context(), CL_MEM_READ_ONLY, per_batch * N);
      s.out = cl::Buffer(dev.context(), CL_MEM_WRITE_ONLY, per_batch * N);
    }
  }
  // Write, launch and read back batch `n` messages through slot `slot`, without waiting: the
  // returned event completes when `to` holds the results.
  cl::Event enqueue(std::size_t slot, const test_message<N>* from, test_message<N>* to, std::size_t n) {
    auto& s = slots_[slot];
    queue_.enqueueWriteBuffer(s.in, CL_FALSE, 0, n * N, from);
    kernel_.setArg(0, s.in);
    kernel_.setArg(1, s.out);
    // Groups of 64 where the batch divides (what a user picks; the driver's own choice for a
    // NullRange is one item per group on PoCL).
    queue_.enqueueNDRangeKernel(kernel_, cl::NullRange, cl::NDRange(n), n % 64 == 0 ? cl::NDRange(64) : cl::NullRange);
    cl::Event done;
    queue_.enqueueReadBuffer(s.out, CL_FALSE, 0, n * N, to, nullptr, &done);
    queue_.flush();
    return done;
  }

private:
  struct slot {
    cl::Buffer in, out;
  };
  cl::Kernel kernel_;
  cl::CommandQueue queue_;
  std::array<slot, 2> slots_;
};

// The hand-written program for a chain of devices: batch b runs on hop h at step b + h, two
// batches in flight per hop, the host generating, relaying between devices and verifying.
template <std::size_t N> double handwritten_stream(const std::vector<const device*>& devices, std::uint32_t count) {
  const std::size_t per_batch = std::max<std::size_t>(1, batch_bytes / N);
  const std::size_t hops = devices.size();
  std::vector<handwritten_hop<N>> hop;
  hop.reserve(devices.size());
  for (const auto* d : devices)
    hop.emplace_back(*d, per_batch);
  // data[h][slot]: the input of hop h (h == hops: the results); done[h][slot]: hop h's read.
  std::vector<std::array<std::vector<test_message<N>>, 2>> data(hops + 1);
  for (auto& d : data)
    for (auto& v : d)
      v.resize(per_batch);
  std::vector<std::array<cl::Event, 2>> done(hops);
  const std::size_t batches = (count + per_batch - 1) / per_batch;
  const auto size_of = [&](std::size_t b) { return std::min<std::size_t>(per_batch, count - b * per_batch); };
  const auto t0 = clock_type::now();
  for (std::size_t step = 0; step < batches + hops; ++step) {
    if (step >= hops && step - hops < batches) { // verify batch step - hops
      const auto b = step - hops;
      done[hops - 1][b % 2].wait();
      const auto& got = data[hops][b % 2];
      for (std::size_t i = 0; i < size_of(b); ++i) {
        const auto seq = static_cast<std::uint32_t>(b * per_batch + i);
        if (got[i].seq != seq || got[i].check != test_check_after(seq, static_cast<int>(hops)))
          throw std::runtime_error("versus: the hand-written program lost or corrupted message " + std::to_string(seq));
      }
    }
    for (std::size_t h = hops; h-- > 0;) {
      if (step < h || step - h >= batches) continue;
      const auto b = step - h;
      const auto slot = b % 2;
      if (b >= 2) done[h][slot].wait(); // batch b - 2 has left this slot's host memory
      if (h == 0) {
        for (std::size_t i = 0; i < size_of(b); ++i)
          data[0][slot][i] = make_test_message<N>(static_cast<std::uint32_t>(b * per_batch + i));
      } else {
        done[h - 1][slot].wait(); // batch b is back from the previous device
      }
      done[h][slot] = hop[h].enqueue(slot, data[h][slot].data(), data[h + 1][slot].data(), size_of(b));
    }
  }
  return count / seconds_since(t0);
}

// ringpipe for the same chain: inlet -> test_map on each device -> outlet, driven from this
// thread as tests drive it (testing::stream_test_messages: runs of 256, a backoff when idle),
// through push_n/pop_n of its own arrays or in place in the rings' windows (as the hand-written
// program makes and checks its messages in its mapped buffers).
template <std::size_t N>
double ringpipe_stream(runtime& rt, const std::vector<const device*>& devices, std::uint32_t count, const settings& s,
                       pipeline_objective objective = pipeline_objective::automatic,
                       testing::stream_form form = testing::stream_form::copies) {
  using msg = test_message<N>;
  pipeline_options options;
  options.name = "versus";
  options.objective = objective;
  const auto view = watch(s, options);
  pipeline p(rt, options);
  auto in = p.add_inlet<msg>("in");
  auto out = p.add_outlet<msg>("out");
  output_port<msg> last = in.out();
  for (std::size_t h = 0; h < devices.size(); ++h) {
    auto k = p.add_kernel<msg, msg>("k" + std::to_string(h), {test_stages_source(N), "test_map"},
                                    on_device(devices[h]->index()));
    p.connect(last, k.in());
    last = k.out();
  }
  p.connect(last, out.in());
  p.start();
  const auto o = testing::stream_test_messages<N>(p, "in", "out", count, static_cast<int>(devices.size()),
                                                  std::chrono::minutes(10), 256, form);
  if (o.received != count || o.wrong != 0)
    throw std::runtime_error("versus: ringpipe delivered " + std::to_string(o.received) + " of " +
                             std::to_string(count) + " messages, " + std::to_string(o.wrong) + " wrong");
  const double rate = o.rate();
  p.inlet<msg>("in").close();
  p.wait(60s);
  if (s.verbose) std::cerr << p.plan() << p.metrics().table() << "\n";
  return rate;
}

// The README's first form against inlet/outlet: add_source -> test_map -> add_sink, per message
// or with batch functions (add_source_batch, add_sink_batch), every message verified in the sink.
// Timed as the inlet/outlet form is, from the first message made to the last one checked (the
// pipeline's start and teardown are left out of both).
double source_sink_stream(runtime& rt, const device& dev, std::uint32_t count, bool batches, const settings& s) {
  using msg = test_message<16>;
  pipeline p(rt, {"versus-source-sink"});
  std::uint32_t next = 0, expected = 0, wrong = 0;
  clock_type::time_point first{}, last{};
  const auto check = [&](const msg& m) {
    if (m.seq != expected || m.check != test_check_after(expected, 1)) ++wrong;
    if (++expected == count) last = clock_type::now();
  };
  stage_ref<no_message, msg> src{};
  stage_ref<msg, no_message> sink{};
  if (batches) {
    // Indexed from a local counter, as the inlet/outlet loop is: the compiler keeps it in a
    // register (a counter behind a reference may alias the messages written).
    src = p.add_source_batch<msg>("source", [&](std::span<msg> room) -> std::optional<std::size_t> {
      if (next == count) return std::nullopt;
      if (next == 0) first = clock_type::now();
      const auto n = std::min<std::size_t>(room.size(), count - next);
      const std::uint32_t from = next;
      for (std::size_t i = 0; i < n; ++i)
        room[i] = make_test_message<16>(from + static_cast<std::uint32_t>(i));
      next = from + static_cast<std::uint32_t>(n);
      return n;
    });
    sink = p.add_sink_batch<msg>("sink", [&](std::span<const msg> in) {
      std::uint32_t seq = expected, errors = 0;
      for (const auto& m : in) {
        if (m.seq != seq || m.check != test_check_after(seq, 1)) ++errors;
        ++seq;
      }
      wrong += errors;
      expected = seq;
      if (expected == count) last = clock_type::now();
    });
  } else {
    src = p.add_source<msg>("source", [&]() -> std::optional<msg> {
      if (next == count) return std::nullopt;
      if (next == 0) first = clock_type::now();
      return make_test_message<16>(next++);
    });
    sink = p.add_sink<msg>("sink", check);
  }
  auto k = p.add_kernel<msg, msg>("k", {test_stages_source(16), "test_map"}, on_device(dev.index()));
  p.connect(src.out(), k.in());
  p.connect(k.out(), sink.in());
  p.run(10min);
  if (s.verbose) std::cerr << p.plan() << p.metrics().table() << "\n";
  if (wrong != 0 || expected != count) throw std::runtime_error("versus: the source/sink pipeline lost messages");
  return count / std::chrono::duration<double>(last - first).count();
}

struct round_trip_times {
  double ours = 0, theirs = 0; // p50, microseconds
  std::string mode;            // what ringpipe's kernel ran as
};

// Calls `done` until it says true (false after `timeout`), without sleeping or yielding.
template <class Done> bool poll_until(Done&& done, std::chrono::nanoseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  while (!done())
    if (clock_type::now() >= deadline) return false;
  return true;
}

// One message in flight: ringpipe's round trip through a kernel (in the mode the runtime chooses,
// or `mode`), and the hand-written program's write, launch and blocking read per message; each
// message sent `gap` after the last came back (sporadic messages: a proxy that is not watching a
// resident kernel has backed off to its longest sleep by then). `polled`: the application waits
// in a loop of try_pop instead of pop. p50 in microseconds.
round_trip_times round_trips(runtime& rt, const device& dev, std::uint32_t samples,
                             std::optional<kernel_mode> mode = std::nullopt,
                             std::chrono::microseconds gap = std::chrono::microseconds(0), bool polled = false) {
  using msg = test_message<16>;
  const auto quiet = [gap] {
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
  };
  std::vector<double> ours, theirs;
  std::string ran_as;
  {
    pipeline p(rt, {"versus-rtt"});
    kernel_options options;
    options.mode = mode;
    auto in = p.add_inlet<msg>("in");
    auto k = p.add_kernel<msg, msg>("k", {test_stages_source(16), "test_map"}, on_device(dev.index()), options);
    auto out = p.add_outlet<msg>("out");
    p.connect(in.out(), k.in());
    p.connect(k.out(), out.in());
    p.start();
    auto push = p.inlet<msg>("in");
    auto pop = p.outlet<msg>("out");
    for (std::uint32_t i = 0; i < samples; ++i) {
      msg m = make_test_message<16>(i);
      quiet();
      const auto t0 = clock_type::now();
      push.push(m, 10s);
      const bool got = polled ? poll_until([&] { return pop.try_pop(m); }, 10s) : pop.pop(m, 10s);
      if (!got || m.seq != i || m.check != test_check_after(i, 1))
        throw std::runtime_error("versus: ringpipe lost a ping");
      ours.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    const auto m = p.metrics();
    if (const auto* k = m.stage("k")) ran_as = k->mode;
    push.close();
    p.wait(60s);
  }
  handwritten_hop<16> hop(dev, 1);
  msg got{};
  for (std::uint32_t i = 0; i < std::max<std::uint32_t>(samples / 4, 1); ++i) {
    const auto m = make_test_message<16>(i);
    quiet();
    const auto t0 = clock_type::now();
    hop.enqueue(0, &m, &got, 1).wait();
    if (got.seq != i || got.check != test_check_after(i, 1))
      throw std::runtime_error("versus: wrong hand-written ping");
    theirs.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return {percentile(ours, 0.5), percentile(theirs, 0.5), ran_as};
}

// The cores' round trip as the row being measured began (the end of the one before): a row
// records the larger of it and the round trip as the row ends, the far state if it met it.
double cores_ns_before_row = 0;

// One row: both measurements under their names and their ratio, kept and printed.
void record(bench_context& c, const std::string& shape, std::size_t msg_bytes, std::size_t devices,
            std::pair<const char*, double> ours, std::pair<const char*, double> theirs, double ratio,
            const std::pair<const char*, std::string>& also = {}) {
  result r{"versus",
           {{"shape", shape}, {"msg_bytes", std::to_string(msg_bytes)}, {"devices", std::to_string(devices)}},
           {{ours.first, ours.second}, {theirs.first, theirs.second}, {"ratio", ratio}}};
  if (also.first != nullptr) r.params[also.first] = also.second;
  const double cores_ns_after_row = cores_round_trip_ns();
  r.metrics["cores_round_trip_ns"] = std::max(cores_ns_before_row, cores_ns_after_row);
  cores_ns_before_row = cores_ns_after_row;
  c.results.push_back(r);
  std::cerr << "  versus " << std::left << std::setw(42) << shape << ours.first << " " << std::setw(12) << ours.second
            << theirs.first << " " << std::setw(12) << theirs.second << "ratio " << std::setw(10) << ratio << "cores "
            << std::fixed << std::setprecision(0) << r.metrics["cores_round_trip_ns"] << " ns\n"
            << std::defaultfloat << std::setprecision(6);
}

// Rounds of each alternated pair: this machine's throughput moves several-fold between runs, and
// the best of four rounds is steadier than the best of two.
int rounds(const bench_context& c) { return c.s.quick ? 2 : 4; }

template <std::size_t N>
void stream_shape(bench_context& c, const char* shape, const std::vector<const device*>& devices, std::uint32_t count,
                  pipeline_objective objective = pipeline_objective::automatic) {
  // Alternated, so that all see the same machine: hand-written, ringpipe (copies, windows), ...
  double ours = 0, in_place = 0, theirs = 0;
  for (int round = 0; round < rounds(c); ++round) {
    theirs = std::max(theirs, handwritten_stream<N>(devices, count));
    ours = std::max(ours, ringpipe_stream<N>(c.rt, devices, count, c.s, objective));
    in_place =
        std::max(in_place, ringpipe_stream<N>(c.rt, devices, count, c.s, objective, testing::stream_form::windows));
  }
  record(c, shape, N, devices.size(), {"ringpipe_msgs_per_s", ours}, {"handwritten_msgs_per_s", theirs}, ours / theirs);
  auto& r = c.results.back();
  r.metrics["ringpipe_windows_msgs_per_s"] = in_place;
  r.metrics["windows_ratio"] = in_place / theirs;
  std::cerr << "  versus " << std::left << std::setw(42) << (std::string(shape) + ", in place")
            << "ringpipe_msgs_per_s " << std::setw(12) << in_place << "windows_ratio " << in_place / theirs << "\n";
}

} // namespace

void versus_topic(bench_context& c) {
  if (!c.selected("versus")) return;
  const std::uint32_t small = c.s.stream_messages() * 4, large = c.s.quick ? 10'000 : 100'000;
  cores_ns_before_row = cores_round_trip_ns();
  std::cerr << "  versus: best of " << rounds(c) << " alternated runs each; ratio = ringpipe / hand-written; cores = a "
            << "cache line's round trip between two cores as the row ran (on a VM its vCPUs move near and far)\n";
  stream_shape<16>(c, "one_device_16B", {&c.dev}, small);
  stream_shape<4096>(c, "one_device_4KiB", {&c.dev}, large);
  if (c.rt.devices().size() >= 2) {
    stream_shape<16>(c, "two_devices_chained_16B", {&c.rt.device_at(0), &c.rt.device_at(1)}, small);
    stream_shape<16>(c, "two_devices_chained_16B_latency", {&c.rt.device_at(0), &c.rt.device_at(1)}, small,
                     pipeline_objective::latency);
  } else {
    std::cerr << "  versus two_devices_chained_16B: needs two devices (POCL_DEVICES='pthread pthread'); not run\n";
  }
  for (const bool batches : {false, true}) {
    double forms = 0, inlets = 0;
    for (int round = 0; round < rounds(c); ++round) {
      forms = std::max(forms, source_sink_stream(c.rt, c.dev, small, batches, c.s));
      inlets = std::max(inlets, ringpipe_stream<16>(c.rt, {&c.dev}, small, c.s));
    }
    record(c, batches ? "source_sink_batches_vs_inlet_outlet_16B" : "source_sink_vs_inlet_outlet_16B", 16, 1,
           {"source_sink_msgs_per_s", forms}, {"inlet_outlet_msgs_per_s", inlets}, forms / inlets);
  }
  const auto rtt = round_trips(c.rt, c.dev, c.s.rtt_samples());
  // The ratio is the other way round: how many times shorter ringpipe's round trip is. A kernel
  // that is not resident (a device without the mode) takes a launch per message, as the
  // hand-written program does: the mode says which.
  record(c, "one_message_round_trip", 16, 1, {"ringpipe_rtt_p50_us", rtt.ours}, {"handwritten_rtt_p50_us", rtt.theirs},
         rtt.theirs / rtt.ours, {"mode", rtt.mode});
  // One message after every 2 ms of quiet through a kernel that is not resident (batched, and
  // parked where the device can): its proxy sleeps between polls, and the push wakes it.
  for (const auto mode : {kernel_mode::batched, kernel_mode::parked}) {
    const std::string shape = "sporadic_round_trip_" + std::string(to_string(mode));
    if (!c.dev.info().supports(mode)) {
      std::cerr << "  versus " << shape << ": device '" << c.dev.name() << "' cannot run it; not run\n";
      continue;
    }
    const auto rtt = round_trips(c.rt, c.dev, c.s.rtt_samples() / 10, mode, 2ms);
    record(c, shape, 16, 1, {"ringpipe_rtt_p50_us", rtt.ours}, {"handwritten_rtt_p50_us", rtt.theirs},
           rtt.theirs / rtt.ours);
  }
  // The same batched round trip with the application polling try_pop in a loop, as a program
  // that never blocks does: on a CPU device the worker the push woke must not wait behind it.
  const auto polled = round_trips(c.rt, c.dev, c.s.rtt_samples() / 10, kernel_mode::batched, 2ms, true);
  record(c, "sporadic_round_trip_batched_polled", 16, 1, {"ringpipe_rtt_p50_us", polled.ours},
         {"handwritten_rtt_p50_us", polled.theirs}, polled.theirs / polled.ours);
}

} // namespace ringpipe::bench
