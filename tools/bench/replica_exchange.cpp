// Topic `replica_exchange`: parallel tempering of 2D Ising lattices with resident replicas. One
// ring kernel per device holds its replicas (dealt round robin) for the whole run and sweeps them;
// at each barrier point the temperatures of neighbouring replicas are swapped (even/odd pairs,
// accepted with min(1, exp(db * dE))) before any kernel goes on: by the last kernel to arrive
// (rp_barrier_arrive_last), or by the host's completion function. The cost of an exchange: the
// time per phase with an exchange every 100 sweeps, less the time of 100 sweeps in a run of the
// same sweeps in one phase, and the time of a phase with no sweeps, all in this run. The kernels
// wait on their devices, so the devices must share fine-grained SVM (PoCL); every energy is
// recomputed on the host at the end.

#include "bench.hpp"

#include <cmath>

namespace ringpipe::bench {
namespace {

constexpr std::uint32_t side = 32, cells = side * side, replicas = 16, seed = 2026;
constexpr std::size_t lattice_bytes = std::size_t{replicas} * cells, threshold_words = std::size_t{2} * replicas;

const char* const resident_source = R"CL(
#include <ringpipe/barrier.clh>
RINGPIPE_DECLARE_SIZES(rx_replicas, 0, 0)
#define SIDE 32
inline uint rx_mix(uint x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16; return x; }

// The exchange of phase p: neighbouring temperatures (even or odd pairs) swap their lattices
// with probability min(1, exp(db * dE)); then each lattice gets its temperature's thresholds.
inline void rx_exchange(uint p, uint total, uint seed, __global const int* energy, __global uint* at,
                        __global const float* beta, __global const uint* by_temperature, __global uint* thresholds,
                        __global uint* counts) {
  for (uint t = p % 2; t + 1 < total; t += 2) {
    const float delta = (beta[t] - beta[t + 1]) * (float)(energy[at[t]] - energy[at[t + 1]]);
    const float u = (float)(rx_mix(rx_mix(seed ^ 0xabcdu) ^ (p * total + t)) >> 8) / 16777216.0f;
    counts[1] += 1;
    if (u < fmin(1.0f, exp(delta))) { const uint x = at[t]; at[t] = at[t + 1]; at[t + 1] = x; counts[0] += 1; }
  }
  for (uint t = 0; t < total; ++t) {
    thresholds[2 * at[t]] = by_temperature[2 * t];
    thresholds[2 * at[t] + 1] = by_temperature[2 * t + 1];
  }
}

// Lattices first, first + stride, ... of `total`; thresholds[2r], [2r + 1]: lattice r accepts a
// flip raising the energy by 4 (8) when a hash is below it. With `on_device`, the last kernel to
// arrive at each barrier point runs the exchange; otherwise the host's completion function does.
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void rx_replicas(RINGPIPE_KERNEL_PARAMS, __global rp_barrier_seat* seat, __global char* spins,
                 __global int* energy, __global uint* thresholds, __global uint* at, __global const float* beta,
                 __global const uint* by_temperature, __global uint* counts, uint first, uint stride, uint total,
                 uint sweeps, uint phases, uint seed, uint on_device) {
  rp_begin(ctl);
  for (uint p = 0; p < phases; ++p) {
    for (uint r = first; r < total; r += stride) {
      __global char* s = spins + r * SIDE * SIDE;
      const uint t4 = thresholds[2 * r], t8 = thresholds[2 * r + 1];
      for (uint k = 0; k < sweeps; ++k)
        for (int i = 0; i < SIDE * SIDE; ++i) {
          const int x = i % SIDE, y = i / SIDE;
          const int sum = s[y * SIDE + (x + 1) % SIDE] + s[y * SIDE + (x + SIDE - 1) % SIDE] +
                          s[((y + 1) % SIDE) * SIDE + x] + s[((y + SIDE - 1) % SIDE) * SIDE + x];
          const int rise = 2 * s[i] * sum;
          const uint u = rx_mix(rx_mix(rx_mix(seed ^ r * 0x9e3779b9u) ^ (p * sweeps + k)) ^ (uint)i);
          if (rise <= 0 || u < (rise == 4 ? t4 : t8)) s[i] = (char)-s[i];
        }
      int e = 0;
      for (int i = 0; i < SIDE * SIDE; ++i)
        e -= s[i] * (s[(i / SIDE) * SIDE + (i + 1) % SIDE] + s[((i / SIDE + 1) % SIDE) * SIDE + i % SIDE]);
      energy[r] = e;
    }
    uint phase;
    if (!on_device) {
      phase = rp_barrier_arrive(seat);
    } else if (rp_barrier_arrive_last(seat, &phase)) {
      rx_exchange(p, total, seed, energy, at, beta, by_temperature, thresholds, counts);
      rp_barrier_release(seat, phase);
    }
    const uint why = rp_barrier_wait(seat, ctl, phase);
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
  }
  rp_end(ctl, RP_STATE_STOPPED);
}
)CL";

std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
  return x;
}
float beta_at(std::uint32_t t) { return 0.2F + 0.4F * static_cast<float>(t) / (replicas - 1); } // around 0.44
std::uint32_t threshold(float beta, int rise) {
  return static_cast<std::uint32_t>(std::exp(-rise * static_cast<double>(beta)) * 4294967295.0);
}
int energy_of(const std::int8_t* s) {
  int e = 0;
  for (std::uint32_t i = 0; i < cells; ++i)
    e -= s[i] * (s[(i / side) * side + (i + 1) % side] + s[((i / side + 1) % side) * side + i % side]);
  return e;
}

template <class T> device_array<T> shared_array(runtime& rt, const device& d, std::size_t n, const char* name) {
  return device_array<T>(rt, d, n, name, array_memory::shared);
}

struct exchange_run {
  double phase_us = 0;     // mean time per phase, from the kernels' start to their end
  double host_step_us = 0; // mean time of the host's exchange step (exchanges on the host)
  std::uint32_t accepted = 0, tried = 0;
};

/// Runs `phases` phases of `sweeps` sweeps on one kernel per device in `devs`, an exchange at each
/// barrier point (on the last kernel to arrive, or on the host); checks every final energy
/// against the host's and that the temperatures are still a permutation.
exchange_run run_exchanges(runtime& rt, const std::vector<const device*>& devs, std::uint32_t sweeps,
                           std::uint32_t phases, bool on_device) {
  const device& d0 = *devs[0];
  auto spins = shared_array<std::int8_t>(rt, d0, lattice_bytes, "spins");
  auto energy = shared_array<std::int32_t>(rt, d0, replicas, "energy");
  auto thresholds = shared_array<std::uint32_t>(rt, d0, threshold_words, "thresholds");
  auto at = shared_array<std::uint32_t>(rt, d0, replicas, "at"); // at[t]: the lattice at temperature t
  auto beta = shared_array<float>(rt, d0, replicas, "beta");
  auto by_temperature = shared_array<std::uint32_t>(rt, d0, threshold_words, "by temperature");
  auto counts = shared_array<std::uint32_t>(rt, d0, 2, "accepted, tried");
  for (std::uint32_t i = 0; i < replicas * cells; ++i)
    spins.data()[i] = static_cast<std::int8_t>(mix(seed + i) & 1 ? 1 : -1);
  for (std::uint32_t t = 0; t < replicas; ++t) {
    const std::size_t pair = std::size_t{2} * t; // a lattice's (a temperature's) two thresholds
    at.data()[t] = t;
    beta.data()[t] = beta_at(t);
    by_temperature.data()[pair] = thresholds.data()[pair] = threshold(beta_at(t), 4);
    by_temperature.data()[pair + 1] = thresholds.data()[pair + 1] = threshold(beta_at(t), 8);
  }
  counts.data()[0] = counts.data()[1] = 0;
  double host_s = 0;
  barrier_options options;
  options.name = "replica exchange";
  options.timeout = 60s;
  if (!on_device)
    options.on_phase = [&](std::uint32_t p) { // the same exchange, before any replica sweeps on
      const auto t0 = clock_type::now();
      std::uint32_t* a = at.data();
      const std::int32_t* e = energy.data();
      for (std::uint32_t t = p % 2; t + 1 < replicas; t += 2) {
        const float delta = (beta_at(t) - beta_at(t + 1)) * static_cast<float>(e[a[t]] - e[a[t + 1]]);
        const float u = static_cast<float>(mix(mix(seed ^ 0xabcdu) ^ (p * replicas + t)) >> 8) / 16777216.0F;
        ++counts.data()[1];
        if (u < std::min(1.0F, std::exp(delta))) std::swap(a[t], a[t + 1]), ++counts.data()[0];
      }
      for (std::size_t t = 0; t < replicas; ++t) {
        thresholds.data()[2 * std::size_t{a[t]}] = by_temperature.data()[2 * t];
        thresholds.data()[2 * std::size_t{a[t]} + 1] = by_temperature.data()[2 * t + 1];
      }
      host_s += seconds_since(t0);
    };
  std::vector<std::unique_ptr<ring_kernel<no_message, no_message>>> kernels;
  std::vector<barrier_participant> members;
  for (std::uint32_t d = 0; d < devs.size(); ++d) {
    auto k = std::make_unique<ring_kernel<no_message, no_message>>(rt, *devs[d],
                                                                   kernel_spec(resident_source, "rx_replicas"));
    unsigned arg = 1;
    for (const array_bytes* a :
         std::initializer_list<const array_bytes*>{&spins, &energy, &thresholds, &at, &beta, &by_temperature, &counts})
      a->bind_kernel_arg(*k, arg++);
    for (const std::uint32_t v : {d, static_cast<std::uint32_t>(devs.size()), replicas, sweeps, phases, seed,
                                  static_cast<std::uint32_t>(on_device)})
      k->set_arg(arg++, v);
    members.emplace_back(*k, 0);
    kernels.push_back(std::move(k));
  }
  barrier bar(members, options);
  const auto t0 = clock_type::now();
  for (auto& k : kernels)
    k->start_buffers(nullptr, nullptr);
  for (auto& k : kernels)
    k->wait(300s);
  exchange_run out{seconds_since(t0) * 1e6 / phases, host_s * 1e6 / phases, counts.data()[0], counts.data()[1]};
  std::vector<bool> seen(replicas);
  for (std::uint32_t t = 0; t < replicas; ++t)
    seen.at(at.data()[t]) = true;
  for (std::uint32_t r = 0; r < replicas; ++r)
    if (!seen[r] || energy_of(spins.data() + std::size_t{r} * cells) != energy.data()[r])
      throw error(errc::invalid_argument, "replica_exchange: lattice " + std::to_string(r) +
                                              (seen[r] ? "'s energy from its device differs from the host's"
                                                       : " lost its temperature in an exchange"));
  return out;
}

} // namespace

void replica_exchange_topic(bench_context& c) {
  if (!c.selected("replica_exchange")) return;
  std::vector<const device*> devs;
  for (const auto& d : c.rt.devices().devices())
    if (d.info().svm.fine_buffer && d.info().svm.atomics && d.info().c11_atomics &&
        (devs.empty() || d.shares_context_with(*devs[0])) && d.info().persistent_budget > devs.size())
      devs.push_back(&d);
  if (devs.empty()) {
    std::fprintf(stderr, "  replica_exchange: skipped, no device with fine-grained SVM and atomics (PoCL)\n");
    return;
  }
  // What an exchange costs, two ways: alone (phases with no sweeps: the barrier round and the
  // exchange), and added to a phase of 100 sweeps (against the same sweeps in one phase; this also
  // counts waiting for the slower kernel). Three rounds, interleaved; medians.
  const std::uint32_t sweeps = 100, phases = c.s.quick ? 20 : 100, alone_phases = c.s.quick ? 200 : 2000;
  (void)run_exchanges(c.rt, devs, 1, 2, true); // compiles the kernel: not timed
  std::vector<double> one_phase, with[2], alone[2];
  std::uint32_t accepted[2] = {0, 0}, tried[2] = {0, 0};
  for (int round = 0; round < 3; ++round) {
    one_phase.push_back(run_exchanges(c.rt, devs, sweeps * phases, 1, true).phase_us / phases);
    for (const int where : {0, 1}) {
      const auto run = run_exchanges(c.rt, devs, sweeps, phases, where == 0);
      with[where].push_back(run.phase_us);
      accepted[where] += run.accepted, tried[where] += run.tried;
      alone[where].push_back(run_exchanges(c.rt, devs, 0, alone_phases, where == 0).phase_us);
    }
  }
  const double sweep_us = percentile(one_phase, 0.5);
  for (const int where : {0, 1}) {
    const double alone_us = percentile(alone[where], 0.5), added_us = percentile(with[where], 0.5) - sweep_us;
    result r{"replica_exchange",
             {{"devices", std::to_string(devs.size())},
              {"replicas", std::to_string(replicas)},
              {"lattice", std::to_string(side) + "x" + std::to_string(side)},
              {"sweeps_per_exchange", std::to_string(sweeps)},
              {"exchange_on", where == 0 ? "device" : "host"}},
             {}};
    r.metrics["sweeps_us"] = sweep_us;
    r.metrics["exchange_us"] = alone_us;
    r.metrics["exchange_over_sweeps"] = alone_us / sweep_us;
    r.metrics["added_to_phase_us"] = added_us;
    r.metrics["added_over_sweeps"] = added_us / sweep_us;
    r.metrics["acceptance"] = static_cast<double>(accepted[where]) / std::max(1u, tried[where]);
    c.results.push_back(r);
    std::fprintf(stderr,
                 "  replica_exchange %zu device(s), %u replicas, exchange on the %s: %u sweeps %.0f us | an exchange "
                 "%.2f us (%.3f%% of the sweeps' time) | added to a phase %.1f us (%.2f%%) | acceptance %.2f\n",
                 devs.size(), replicas, where == 0 ? "device" : "host", sweeps, sweep_us, alone_us,
                 100 * alone_us / sweep_us, added_us, 100 * added_us / sweep_us, r.metrics["acceptance"]);
  }
}

} // namespace ringpipe::bench
