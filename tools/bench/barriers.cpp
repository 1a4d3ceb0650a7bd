// Barrier phases between host threads: ringpipe::barrier (split-phase, completion, timeouts,
// metrics) against std::barrier, the standard library's, in the same run. Time per phase, p50 and
// p99, from one participant's arrive_and_wait to its release. Where two PoCL devices share SVM,
// ring kernels on both as participants too: alone (they release each other on the device), with
// a completion function (the host completes each phase), and with a host thread; a kernel has
// no clock, so those report the mean phase time over the whole run.

#include "bench.hpp"

#include <phased_kernel.hpp>

#include <atomic>
#include <barrier>
#include <bit>
#include <thread>

namespace ringpipe::bench {
namespace {

// `threads` participants run `phases` phases through `sync(t)`; participant 0's phase times.
template <class Sync> std::vector<double> phase_times(std::size_t threads, std::uint32_t phases, Sync&& sync) {
  std::vector<double> us;
  us.reserve(phases);
  std::vector<std::thread> others;
  for (std::size_t t = 1; t < threads; ++t)
    others.emplace_back([&, t] {
      for (std::uint32_t k = 0; k < phases; ++k)
        sync(t);
    });
  for (std::uint32_t k = 0; k < phases; ++k) {
    const auto t0 = clock_type::now();
    sync(0);
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  for (auto& o : others)
    o.join();
  return us;
}

// A hand-written sense-reversing spin barrier: what a program without a barrier type writes.
class spin_barrier {
public:
  explicit spin_barrier(std::uint32_t n) : n_(n) {}
  void arrive_and_wait() {
    const std::uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
      return;
    }
    while (phase_.load(std::memory_order_acquire) == phase) {
    }
  }

private:
  const std::uint32_t n_;
  alignas(64) std::atomic<std::uint32_t> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> phase_{0};
};

// Two test_phases kernels on devices a and b (plus a host participant if `with_host`) run
// `phases` phases; the mean time per phase, from their start to their end, in microseconds.
double kernel_phase_us(runtime& rt, const device& a, const device& b, std::uint32_t phases, bool with_host,
                       bool with_completion) {
  using namespace ringpipe::testing;
  const std::uint32_t n = with_host ? 3 : 2;
  shared_counters done(a, n);
  auto k0 = make_phased_kernel(rt, a, done, 0, n, phases);
  auto k1 = make_phased_kernel(rt, b, done, 1, n, phases);
  barrier_options options;
  options.name = "bench";
  if (with_completion) options.on_phase = [](std::uint32_t) {};
  std::vector<barrier_participant> members{{*k0, 0}, {*k1, 0}};
  if (with_host) members.emplace_back("host");
  barrier bar(members, options);
  const auto t0 = clock_type::now();
  k0->start_buffers(nullptr, nullptr);
  k1->start_buffers(nullptr, nullptr);
  if (with_host) host_phases(bar, 2, done, n, phases);
  k0->wait(120s);
  k1->wait(120s);
  const double us = seconds_since(t0) * 1e6 / phases;
  if (done.errors() != 0) throw std::runtime_error("barrier bench: a participant ran ahead of the barrier");
  return us;
}

// What test_phases_relayed and test_phases_any emit each phase (rp_phase_msg).
struct phase_message {
  std::uint32_t phase, pad[3];
};

// A batched kernel on a device without shared memory and a host thread: the kernel arrives through
// the host once per launch. Against the hand-written way: launch, clFinish, per phase.
void relayed_row(bench_context& c, const device& dev) {
  using namespace ringpipe::testing;
  const std::uint32_t phases = c.s.quick ? 200 : 2'000;
  ring_kernel<no_message, phase_message> k(c.rt, dev, kernel_spec(test_phases_source(), "test_phases_relayed"));
  k.set_arg(0, phases);
  ring<phase_message> emitted(4096);
  barrier_options options;
  options.name = "bench-relayed";
  options.timeout = 60s; // the first launch compiles
  barrier bar({{k, 0, "kernel"}, "host"}, options);
  k.start(emitted);
  bar.arrive_and_wait(1); // phase 0 pays for the compile: not timed
  const auto t0 = clock_type::now();
  for (std::uint32_t p = 1; p < phases; ++p)
    bar.arrive_and_wait(1);
  const double ours = seconds_since(t0) * 1e6 / (phases - 1);
  k.wait(60s);

  // The same without ringpipe: one launch of a one-work-item kernel and clFinish per phase.
  cl::Program program(dev.context(), "__kernel void tick(__global uint* p) { p[0] += 1; }", true);
  cl::Kernel tick(program, "tick");
  cl::Buffer word(dev.context(), CL_MEM_READ_WRITE, 4);
  tick.setArg(0, word);
  cl::CommandQueue queue(dev.context(), dev.cl_device());
  queue.enqueueNDRangeKernel(tick, cl::NullRange, cl::NDRange(1));
  queue.finish();
  const auto t1 = clock_type::now();
  for (std::uint32_t p = 1; p < phases; ++p) {
    queue.enqueueNDRangeKernel(tick, cl::NullRange, cl::NDRange(1));
    queue.finish();
  }
  const double finish = seconds_since(t1) * 1e6 / (phases - 1);
  c.results.push_back({"barrier",
                       {{"participants", "2"}, {"kind", "relayed+host"}, {"device", dev.name()}},
                       {{"mean_us", ours}, {"clfinish_mean_us", finish}, {"phases", phases}}});
  std::cerr << "  barrier relayed+host (" << dev.name() << "): " << ours << " us per phase (launch + clFinish "
            << finish << " us)\n";
}

// Two test_phases_any kernels on devices a and b and a host thread, every kernel arriving through
// the host (barrier_options::kernels_through_host): one launch per phase each. The mean time per
// phase from their start to their end, in microseconds.
double relayed_kernels_phase_us(runtime& rt, const device& a, const device& b, std::uint32_t phases) {
  using namespace ringpipe::testing;
  const kernel_spec spec(test_phases_source(), "test_phases_any");
  ring_kernel<no_message, phase_message> k0(rt, a, spec), k1(rt, b, spec);
  ring<phase_message> from0(std::bit_ceil(phases)), from1(std::bit_ceil(phases));
  for (auto* k : {&k0, &k1})
    k->set_arg(1, phases);
  barrier_options options;
  options.name = "bench-relayed-kernels";
  options.kernels_through_host = true;
  barrier bar({{k0, 0, "k0"}, {k1, 0, "k1"}, "host"}, options);
  const auto t0 = clock_type::now();
  k0.start(from0);
  k1.start(from1);
  for (std::uint32_t p = 0; p < phases; ++p)
    bar.arrive_and_wait(2);
  k0.wait(120s);
  k1.wait(120s);
  const double us = seconds_since(t0) * 1e6 / phases;
  phase_message m{};
  for (auto* emitted : {&from0, &from1})
    for (std::uint32_t p = 0; p < phases; ++p)
      if (!emitted->try_pop(m) || m.phase != p)
        throw std::runtime_error("barrier bench: a relayed kernel ran a phase out of turn");
  return us;
}

void kernel_rows(bench_context& c, double std_p50_us, double spin_p50_us) {
  for (const auto& d : c.rt.devices().devices())
    if (!d.info().svm.fine_buffer) {
      relayed_row(c, d);
      break;
    }
  std::vector<const device*> pocl;
  for (const auto& d : c.rt.devices().devices())
    if (d.info().svm.fine_buffer && d.info().svm.atomics && d.info().c11_atomics && d.info().persistent_budget >= 2)
      pocl.push_back(&d);
  if (pocl.size() < 2 || !pocl[0]->shares_context_with(*pocl[1])) {
    std::cerr
        << "  barrier kernels: skipped, no two devices sharing fine-grained SVM (POCL_DEVICES=\"pthread pthread\")\n";
    return;
  }
  struct row {
    const char* kind;
    bool host, completion;
    std::uint32_t phases;
  };
  const std::uint32_t many = c.s.quick ? 20'000 : 200'000;
  const std::uint32_t few = c.s.quick ? 100 : 500; // a host thread beside two spinning kernels on 2 cores
  for (const row r : {row{"kernels", false, false, many}, row{"kernels+completion", false, true, many},
                      row{"kernels+host", true, false, few}}) {
    const double us = kernel_phase_us(c.rt, *pocl[0], *pocl[1], r.phases, r.host, r.completion);
    result out{"barrier",
               {{"participants", r.host ? "3" : "2"}, {"kind", r.kind}},
               {{"mean_us", us},
                {"std_barrier_p50_us", std_p50_us},
                {"spin_barrier_p50_us", spin_p50_us},
                {"phases", r.phases}}};
    std::cerr << "  barrier " << r.kind << " (two PoCL devices): " << us
              << " us per phase (2 host threads: std::barrier p50 " << std_p50_us << " us, spin barrier p50 "
              << spin_p50_us << " us)\n";
    c.results.push_back(std::move(out));
  }
  const double relayed = relayed_kernels_phase_us(c.rt, *pocl[0], *pocl[1], few);
  c.results.push_back({"barrier",
                       {{"participants", "3"}, {"kind", "kernels+host through host"}},
                       {{"mean_us", relayed}, {"phases", few}}});
  std::cerr << "  barrier kernels+host through host (two PoCL devices, kernels_through_host): " << relayed
            << " us per phase\n";
}

} // namespace

void barrier_topic(bench_context& c) {
  if (!c.selected("barrier")) return;
  const std::uint32_t phases = c.s.quick ? 2'000 : 20'000;
  double std_two = 0, spin_two = 0;
  for (const std::size_t threads : {2u, 3u, 4u}) {
    std::vector<barrier_participant> names;
    for (std::size_t t = 0; t < threads; ++t)
      names.push_back("host" + std::to_string(t));
    barrier ours(names, {});
    const auto mine = phase_times(threads, phases, [&](std::size_t t) { ours.arrive_and_wait(t); });
    std::barrier theirs(static_cast<std::ptrdiff_t>(threads));
    const auto std_times = phase_times(threads, phases, [&](std::size_t) { theirs.arrive_and_wait(); });
    spin_barrier spin(static_cast<std::uint32_t>(threads));
    // Spinning threads beyond the cores wait for time slices: fewer phases there.
    const std::uint32_t spin_phases = threads <= std::thread::hardware_concurrency() ? phases : phases / 100;
    const auto spin_times = phase_times(threads, spin_phases, [&](std::size_t) { spin.arrive_and_wait(); });
    result r{"barrier",
             {{"participants", std::to_string(threads)}, {"kind", "host"}},
             {{"p50_us", percentile(mine, 0.5)},
              {"p99_us", percentile(mine, 0.99)},
              {"p999_us", percentile(mine, 0.999)},
              {"std_barrier_p50_us", percentile(std_times, 0.5)},
              {"std_barrier_p99_us", percentile(std_times, 0.99)},
              {"spin_barrier_p50_us", percentile(spin_times, 0.5)},
              {"spin_barrier_p99_us", percentile(spin_times, 0.99)}}};
    std::cerr << "  barrier " << threads << " host threads: p50 " << r.metrics["p50_us"] << " us, p99 "
              << r.metrics["p99_us"] << " us, p99.9 " << r.metrics["p999_us"] << " us (std::barrier p50 "
              << r.metrics["std_barrier_p50_us"] << " us, p99 " << r.metrics["std_barrier_p99_us"]
              << " us; spin barrier p50 " << r.metrics["spin_barrier_p50_us"] << " us, p99 "
              << r.metrics["spin_barrier_p99_us"] << " us)\n";
    if (threads == 2) {
      std_two = r.metrics["std_barrier_p50_us"];
      spin_two = r.metrics["spin_barrier_p50_us"];
    }
    c.results.push_back(std::move(r));
  }
  kernel_rows(c, std_two, spin_two);
}

} // namespace ringpipe::bench
