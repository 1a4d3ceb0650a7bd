// replica_exchange: parallel tempering of a 2D Ising model. Replicas (32x32 lattices, one per
// temperature) are dealt round robin to one ring kernel per device, which keeps them in a device
// array; a message asks for 25 Metropolis sweeps of a replica at a temperature, the answer is its
// energy. After 100 sweeps of every replica (the barrier point) the host swaps neighbouring
// temperatures in even/odd blocks with probability min(1, exp(db * dE)), reads the lattices back
// and recomputes every energy it used. Random numbers hash (seed, replica, sweep, site): the run
// is the same on 1, 2, .. every device: POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe gives 3.
//   host --{replica, sweeps, temperature}--> [ring] -> sweeps on device 0 (replicas 0,2,4..) --+
//        --{replica, sweeps, temperature}--> [ring] -> sweeps on device 1 (replicas 1,3,5..) --+
//   host <-- {replica, energy} -------------------------------------------------------------+

#include "example_help.hpp"
#include <ringpipe/array.hpp>
#include <ringpipe/kernel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;

constexpr int side = 32, replicas = 16, blocks = 40, sweeps = 100;
constexpr std::uint32_t seed = 2026, part = 25; // sweeps a message: llvmpipe cuts loops of over 65,535 steps
using lattice = std::array<std::int8_t, std::size_t{side} * side>;
struct sweep_job { // accept a flip raising the energy by 4 (8) if its hash < flip4 (flip8)
  std::uint32_t replica, first_sweep, count, flip4, flip8, seed;
};
struct sweep_done {
  std::uint32_t replica;
  std::int32_t energy;
};

const char* const sweep_source = R"CL(
#include <ringpipe/stage.clh>
#define SIDE 32
#define AT(x, y) s[((y) % SIDE) * SIDE + (x) % SIDE]
typedef struct { uint replica, first_sweep, count, flip4, flip8, seed; } sweep_job;
typedef struct { uint replica; int energy; } sweep_done;
inline uint mix(uint x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16; return x; }
inline bool sweep(const sweep_job* j, sweep_done* d, __global char* lattices) {
  __global char* s = lattices + j->replica * SIDE * SIDE; // flat bytes: rusticl misreads arrays in structs
  for (uint k = 0; k < j->count; ++k)
    for (int i = 0; i < SIDE * SIDE; ++i) {
      const int x = i % SIDE, y = i / SIDE;
      const int rise = 2 * s[i] * (AT(x + 1, y) + AT(x + SIDE - 1, y) + AT(x, y + 1) + AT(x, y + SIDE - 1));
      const uint u = mix(mix(mix(j->seed ^ j->replica * 0x9e3779b9u) ^ (j->first_sweep + k)) ^ (uint)i);
      if (rise <= 0 || u < (rise == 4 ? j->flip4 : j->flip8)) s[i] = (char)-s[i];
    }
  d->replica = j->replica, d->energy = 0;
  for (int i = 0; i < SIDE * SIDE; ++i)
    d->energy -= s[i] * (AT(i % SIDE + 1, i / SIDE) + AT(i % SIDE, i / SIDE + 1));
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(sweeps, sweep_job, sweep_done, __global char*, sweep)
)CL";

std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu;
  return x ^ (x >> 16);
}
int energy_of(const lattice& l) {
  int e = 0;
  for (int i = 0; i < side * side; ++i)
    e -= l[i] * (l[(i / side) * side + (i + 1) % side] + l[((i / side + 1) % side) * side + i % side]);
  return e;
}
double beta_at(int t) { return 0.2 + 0.4 * t / (replicas - 1); } // around the critical 0.44
std::uint32_t below(double rise, int t) { return std::uint32_t(std::exp(-rise * beta_at(t)) * 4294967295.0); }

struct replica_kernel { // a device's copy of the lattices, and the ring kernel that sweeps those dealt to it
  replica_kernel(runtime& rt, const device& d, const std::vector<lattice>& start)
      : lattices(rt, d, replicas, "lattices"), in(d, 16), out(d, 16), kernel(rt, d, {sweep_source, "sweeps"}) {
    lattices.write(start);
    kernel.set_arg(0, lattices), kernel.start(in, out);
  }
  device_array<lattice> lattices;
  ring<sweep_job> in;
  ring<sweep_done> out;
  ring_kernel<sweep_job, sweep_done> kernel;
};

struct run_result {
  std::vector<lattice> lattices = std::vector<lattice>(replicas);
  std::vector<int> accepted = std::vector<int>(replicas - 1); // of blocks / 2 tries per pair
  int lowest = 1 << 30, wrong = 0;
};

run_result run(runtime& rt, std::size_t n) { // on devices 0 .. n-1: replica i on device i % n
  run_result r;
  for (int i = 0; i < replicas * side * side; ++i) // a random start, the same for every run
    r.lattices[i / (side * side)][i % (side * side)] = static_cast<std::int8_t>(mix(seed + i) & 1 ? 1 : -1);
  std::vector<std::unique_ptr<replica_kernel>> devs;
  for (std::size_t d = 0; d < n; ++d)
    devs.push_back(std::make_unique<replica_kernel>(rt, rt.device_at(d), r.lattices));
  std::vector<int> at(replicas), energy(replicas); // at[t]: the replica at temperature t
  std::iota(at.begin(), at.end(), 0);
  for (int b = 0; b < blocks; ++b) {
    for (std::uint32_t p = 0; p < sweeps; p += part) {
      for (int t = 0; t < replicas; ++t) // replica at[t] at temperature t
        devs[at[t] % n]->in.push({std::uint32_t(at[t]), b * sweeps + p, part, below(4, t), below(8, t), seed}, 10s);
      for (int got = 0; got < replicas; ++got) // every answer in: the barrier point
        if (sweep_done done{}; devs[got % n]->out.pop(done, 60s))
          energy[done.replica] = done.energy;
        else
          throw error(errc::stage_failed, "the sweeps on " + rt.device_at(got % n).label() + " ended early");
    }
    for (int t = b % 2; t + 1 < replicas; t += 2) { // even, then odd pairs of temperatures
      const double delta = (beta_at(t) - beta_at(t + 1)) * (energy[at[t]] - energy[at[t + 1]]);
      const double u = mix(mix(seed ^ 0xabcdu) ^ static_cast<std::uint32_t>(b * replicas + t)) / 4294967296.0;
      if (u < std::min(1.0, std::exp(delta))) std::swap(at[t], at[t + 1]), ++r.accepted[t];
    }
    for (std::size_t i = 0; i < replicas; ++i) { // the check: lattices back, every energy recomputed
      devs[i % n]->lattices.sub(i, 1).read(std::span(r.lattices).subspan(i, 1));
      r.wrong += energy_of(r.lattices[i]) != energy[i] ? 1 : 0;
    }
    r.lowest = std::min(r.lowest, *std::min_element(energy.begin(), energy.end()));
  }
  for (auto& k : devs)
    k->in.close(), k->kernel.wait(60s);
  return r;
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "Parallel tempering of an Ising model."); c >= 0) return c;
  try {
    runtime rt;
    std::vector<run_result> runs; // the same seed on devices 0 .. n-1, for every n
    for (std::size_t n = 1; n <= rt.devices().size(); ++n)
      runs.push_back(run(rt, n));
    std::printf("%d replicas of %dx%d, %d blocks of %d sweeps, on 1 to %zu device(s)\n", replicas, side, side, blocks,
                sweeps, runs.size());
    for (int t = 0; t + 1 < replicas; ++t)
      std::printf("  beta %.3f <-> %.3f: %3d of %3d swaps accepted\n", beta_at(t), beta_at(t + 1),
                  runs.back().accepted[t], blocks / 2);
    std::printf("lowest energy %d (of %d possible)\n", runs.back().lowest, -2 * side * side);
    int differ = 0, wrong = 0;
    for (const auto& r : runs)
      differ += r.accepted != runs.back().accepted || r.lattices != runs.back().lattices ? 1 : 0, wrong += r.wrong;
    std::printf("%s: runs on 1 to %zu devices: %d differ in swaps or lattices; %d energies differ from the host's\n",
                differ + wrong ? "FAILED" : "OK", runs.size(), differ, wrong);
    return differ + wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replica_exchange: %s\n", e.what());
    return 1;
  }
}
