// heat_diffusion: a hot rod cooling, split over every device. Each device keeps its piece of the
// rod (a split array, one cell of each neighbour's kept as a halo): a step runs on every piece
// where it lives, then the devices swap their edge cells, device to device. Only the halos move
// between steps; the rod crosses the host once each way. Halfway, the rod is moved, device to
// device, to a split weighted by the speeds the first half measured (devices that share the
// host's cores run one after another, so there the fastest takes their whole share).
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

    // Steps `count` times between a and b (the result in a); the last step's report.
    parallel_kernel step(rt, {step_source, "heat_step", "", "heat_diffusion.cpp"});
    const auto run_steps = [&](split_array<float>& a, split_array<float>& b, std::size_t count) {
      std::printf("%zu steps, the rod laid out %s:\n", count, a.layout().describe().c_str());
      for (const auto& piece : a.layout().pieces())
        std::printf("  [%8zu, %8zu) on %s\n", piece.ranges.front().first, piece.ranges.back().last,
                    piece.dev->label().c_str());
      parallel_for_report last;
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t s = 0; s < count; ++s) {
        last = step.run(cells, a, b, r, piece_origin, cl_ulong{cells});
        b.exchange_halos();
        std::swap(a, b);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("  %.1f us a step\n", seconds * 1e6 / static_cast<double>(count));
      return last;
    };

    // First an even split; then the rod moved, device to device, to a split by measured speed.
    split_array<float> u(rt, cells, "u", {.halo = 1}), v(u.layout(), "v");
    u.write(rod);
    const auto measured = run_steps(u, v, steps / 2);
    const split_layout by_speed(rt, cells, {.partition = by_measured_speed(measured), .halo = 1});
    split_array<float> u2 = u.redistributed(by_speed, "u"), v2(by_speed, "v");
    run_steps(u2, v2, steps - steps / 2);
    std::vector<float> result(cells);
    u2.read(result);

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
    std::printf("heat left %.4g\n\nWhat moved (the rod in and out once, halos, the move):\n%s\n", heat,
                rt.transfers().table().c_str());
    if (wrong != 0) {
      std::printf("FAILED: %zu cells differ from the host's steps\n", wrong);
      return 1;
    }
    const auto pieces = u.layout().pieces().size();
    std::printf("OK: %zu steps on %zu device%s, then on %zu by measured speed, every cell as on the host\n", steps,
                pieces, pieces == 1 ? "" : "s", by_speed.pieces().size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat_diffusion failed: %s\n", e.what());
    return 1;
  }
}
