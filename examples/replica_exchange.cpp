// replica_exchange: parallel tempering of a 2D Ising model. Replicas (32x32 lattices, one per
// temperature) are spread over the devices by parallel_for (cyclic: round robin); each block runs
// 100 Metropolis sweeps on every replica, then the host swaps the temperatures of neighbouring
// replicas in even/odd phases with probability min(1, exp((b_i - b_j)(E_i - E_j))). Random numbers
// are a hash of (seed, lattice, sweep, site), so a seed gives the same run on any set of devices:
// it runs on device 0 alone, then on every device, and compares. Energies are recomputed on the
// host, and with them every exchange decision.
//
//   block k:   [sweeps x100 | replicas 0,2,4.. on device 0, 1,3,5.. on device 1]  (parallel_for)
//                  -> energies -> host: swap neighbouring temperatures (even/odd) -> block k+1
// Run with POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./replica_exchange

#include "example_help.hpp"
#include <ringpipe/parallel_for.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

using namespace ringpipe;

constexpr int side = 32, replicas = 16, blocks = 40, sweeps = 100;
constexpr std::uint32_t seed = 2026;
struct lattice {
  std::array<std::int8_t, std::size_t{side} * side> s;
};
struct thresholds {
  std::uint32_t flip4, flip8; // accept a flip raising the energy by 4 (8) if hash < this
};

const char* const sweep_source = R"(
#define SIDE 32
inline uint mix(uint x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16; return x; }
// Lattices as flat bytes (rusticl misreads arrays inside structs), thresholds as pairs of words.
__kernel void sweep(__global const char* in, __global const uint* t, __global char* out, __global int* energy,
                    uint first_sweep, uint count, uint seed) {
  const uint r = get_global_id(0);
  __global char* s = out + r * SIDE * SIDE;
  for (int i = 0; i < SIDE * SIDE; ++i) s[i] = in[r * SIDE * SIDE + i];
  for (uint k = 0; k < count; ++k)
    for (int i = 0; i < SIDE * SIDE; ++i) {
      const int x = i % SIDE, y = i / SIDE;
      const int sum = s[y * SIDE + (x + 1) % SIDE] + s[y * SIDE + (x + SIDE - 1) % SIDE] +
                      s[((y + 1) % SIDE) * SIDE + x] + s[((y + SIDE - 1) % SIDE) * SIDE + x];
      const int rise = 2 * s[i] * sum;
      const uint u = mix(mix(mix(seed ^ r * 0x9e3779b9u) ^ (first_sweep + k)) ^ (uint)i);
      if (rise <= 0 || u < t[2 * r + (rise == 4 ? 0 : 1)]) s[i] = (char)-s[i];
    }
  int e = 0;
  for (int i = 0; i < SIDE * SIDE; ++i)
    e -= s[i] * (s[(i / SIDE) * SIDE + (i + 1) % SIDE] + s[((i / SIDE + 1) % SIDE) * SIDE + i % SIDE]);
  energy[r] = e;
}
)";

std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
  return x;
}
int energy_of(const lattice& l) {
  int e = 0;
  for (int i = 0; i < side * side; ++i)
    e -= l.s[i] * (l.s[(i / side) * side + (i + 1) % side] + l.s[((i / side + 1) % side) * side + i % side]);
  return e;
}
double beta_at(int t) { return 0.2 + 0.4 * t / (replicas - 1); } // around the critical 0.44

struct run_result {
  std::vector<lattice> lattices;
  std::vector<int> accepted, tried;
  int lowest = 0, wrong = 0;
  double sweep_s = 0, exchange_s = 0;
};

run_result run(runtime& rt, std::vector<std::size_t> devices) {
  parallel_for_options o;
  o.devices = std::move(devices);
  o.partition = cyclic_partition{1};
  parallel_kernel k(rt, {sweep_source, "sweep"}, o);
  run_result r{std::vector<lattice>(replicas), std::vector<int>(replicas - 1), std::vector<int>(replicas - 1)};
  for (int i = 0; i < replicas * side * side; ++i) // a random start, the same for every run
    r.lattices[i / (side * side)].s[i % (side * side)] = static_cast<std::int8_t>(mix(seed + i) & 1 ? 1 : -1);
  std::vector<int> at(replicas); // at[t]: the lattice at temperature t
  for (int t = 0; t < replicas; ++t)
    at[t] = t;
  std::vector<lattice> next(replicas);
  std::vector<int> energy(replicas);
  std::vector<thresholds> thr(replicas);
  r.lowest = 1 << 30;
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < replicas; ++t)
      thr[at[t]] = {static_cast<std::uint32_t>(std::exp(-4 * beta_at(t)) * 4294967295.0),
                    static_cast<std::uint32_t>(std::exp(-8 * beta_at(t)) * 4294967295.0)};
    // 25 sweeps per launch: rusticl's llvmpipe returned wrong lattices, without an error, from
    // launches of 100 sweeps (about a second of work per work-item).
    for (int part = 0; part < sweeps; part += 25) {
      const auto rep = k.run(replicas, input(r.lattices), input(thr), output(next), output(energy),
                             std::uint32_t(b * sweeps + part), std::uint32_t(25), seed);
      r.sweep_s += rep.seconds;
      r.lattices.swap(next);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < replicas; ++i) {
      r.wrong += energy_of(r.lattices[i]) != energy[i] ? 1 : 0; // the device's energy, recomputed
      r.lowest = std::min(r.lowest, energy[i]);
    }
    for (int t = b % 2; t + 1 < replicas; t += 2) { // even, then odd pairs of temperatures
      const double delta =
          (beta_at(t) - beta_at(t + 1)) * (energy_of(r.lattices[at[t]]) - energy_of(r.lattices[at[t + 1]]));
      const double u = mix(mix(seed ^ 0xabcdu) ^ static_cast<std::uint32_t>(b * replicas + t)) / 4294967296.0;
      ++r.tried[t];
      if (u < std::min(1.0, std::exp(delta))) std::swap(at[t], at[t + 1]), ++r.accepted[t];
    }
    r.exchange_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return r;
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "Parallel tempering of an Ising model."); c >= 0) return c;
  try {
    runtime rt;
    std::vector<std::size_t> all;
    for (std::size_t d = 0; d < rt.devices().size(); ++d)
      all.push_back(d);
    const auto one = run(rt, {0}), every = run(rt, all);
    std::printf("%d replicas of %dx%d, %d blocks of %d sweeps, on 1 and on %zu device(s)\n", replicas, side, side,
                blocks, sweeps, all.size());
    for (int t = 0; t + 1 < replicas; ++t)
      std::printf("  beta %.3f <-> %.3f: %3d of %3d swaps accepted\n", beta_at(t), beta_at(t + 1), every.accepted[t],
                  every.tried[t]);
    std::printf("lowest energy %d (of %d possible); exchanges took %.3f%% of the sweeps' time\n", every.lowest,
                -2 * side * side, 100 * every.exchange_s / every.sweep_s);
    bool same = one.accepted == every.accepted && one.lowest == every.lowest;
    for (int i = 0; i < replicas; ++i)
      same = same && one.lattices[i].s == every.lattices[i].s;
    if (!same || one.wrong + every.wrong != 0) {
      std::printf("FAILED: %s, %d energies differ from the host's\n", same ? "same runs" : "the runs differ",
                  one.wrong + every.wrong);
      return 1;
    }
    std::printf("OK: the same run on 1 and %zu device(s), every energy recomputed on the host\n", all.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replica_exchange: %s\n", e.what());
    return 1;
  }
}
