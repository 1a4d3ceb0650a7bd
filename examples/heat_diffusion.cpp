// heat_diffusion: a hot rod cooling, split over every device. Each device keeps its piece of the
// rod (a split array, one cell of each neighbour's kept as a halo) for the whole run: a step runs
// on every piece where it lives, then the devices swap their edge cells, device to device. Only
// the halos move between steps; the rod crosses the host once each way.
//
//        piece on device 0          piece on device 1          piece on device 2
//   ┌─┬────────────────────┬─┐ ┌─┬────────────────────┬─┐ ┌─┬────────────────────┬─┐
//   │h│ u[0] ..    u[k-1]  │h│ │h│ u[k] ..   u[2k-1]  │h│ │h│ u[2k] ..   u[n-1]  │h│
//   └─┴────────────────────┴─┘ └─┴────────────────────┴─┘ └─┴────────────────────┴─┘
//                         └─ exchange_halos: edge cells copied into the neighbours' halos ─┘
//
//   step:  v[i] = u[i] + r (u[i-1] - 2 u[i] + u[i+1])   on every piece at once (parallel_for)
//          v.exchange_halos();  swap(u, v)
//
// The result is checked against the same steps on the host, and the transfers are printed.
// Run with POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./heat_diffusion

#include "example_help.hpp"
#include <ringpipe/split_array.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace ringpipe;

const char* step_source = R"CL(
// One explicit step of the heat equation; the rod's ends stay at 0.
__kernel void heat_step(__global const float* u, __global float* v, float r, long origin, ulong n) {
  const size_t i = get_global_id(0);     // position in this piece's storage (after the halo)
  const long cell = origin + (long)i;    // position on the rod
  if (cell == 0 || cell + 1 == (long)n) { v[i] = 0.0f; return; }
  const float left = u[i - 1], here = u[i], right = u[i + 1];
  v[i] = here + r * ((left - here) + (right - here));
}
)CL";

constexpr std::size_t cells = 1 << 20, steps = 200;
constexpr float r = 0.25f;

// The same step on the host, in the kernel's order of operations.
void host_step(const std::vector<float>& u, std::vector<float>& v) {
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (i == 0 || i + 1 == u.size()) {
      v[i] = 0.0f;
      continue;
    }
    const float left = u[i - 1], here = u[i], right = u[i + 1];
    v[i] = here + r * ((left - here) + (right - here));
  }
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "A rod split over every device, halos exchanged, checked."); c >= 0)
    return c;
  try {
    runtime rt;
    // A hot middle third, cold elsewhere.
    std::vector<float> rod(cells, 0.0f);
    for (std::size_t i = cells / 3; i < 2 * cells / 3; ++i)
      rod[i] = 100.0f;

    split_array<float> u(rt, cells, "u", {.halo = 1}), v(u.layout(), "v");
    std::printf("%zu cells over %s:\n", cells, u.layout().describe().c_str());
    for (const auto& piece : u.layout().pieces())
      std::printf("  [%8zu, %8zu) on %s\n", piece.range.first, piece.range.last, piece.dev->label().c_str());
    u.write(rod);

    parallel_kernel step(rt, {step_source, "heat_step", "", "heat_diffusion.cpp"});
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t s = 0; s < steps; ++s) {
      const split_array<float>& from = s % 2 == 0 ? u : v;
      const split_array<float>& to = s % 2 == 0 ? v : u;
      step.run(cells, from, to, r, piece_origin, cl_ulong{cells});
      to.exchange_halos();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<float> result(cells);
    (steps % 2 == 0 ? u : v).read(result);

    // The same rod, stepped on the host.
    std::vector<float> next(cells);
    for (std::size_t s = 0; s < steps; ++s) {
      host_step(rod, next);
      rod.swap(next);
    }
    std::size_t wrong = 0;
    double heat = 0;
    for (std::size_t i = 0; i < cells; ++i) {
      heat += result[i];
      if (std::fabs(result[i] - rod[i]) > 1e-5f * std::max(1.0f, std::fabs(rod[i]))) ++wrong;
    }
    std::printf("%zu steps in %.1f ms (%.1f us a step), heat left %.4g\n\n", steps, seconds * 1e3,
                seconds * 1e6 / steps, heat);
    std::printf("What moved (the rod in and out once, then halos only):\n%s\n", rt.transfers().table().c_str());
    if (wrong != 0) {
      std::printf("FAILED: %zu cells differ from the host's steps\n", wrong);
      return 1;
    }
    std::printf("OK: %zu steps on %zu devices, every cell as on the host\n", steps, u.layout().pieces().size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat_diffusion failed: %s\n", e.what());
    return 1;
  }
}
