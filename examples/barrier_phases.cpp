// barrier_phases: a Jacobi heat stencil split over two devices, in phases at a barrier.
//
//            PoCL #0                                   PoCL #1
//   +----------------------+                  +----------------------+
//   | jacobi: cells 0..N/2 |                  | jacobi: cells N/2..N |
//   +----------------------+                  +----------------------+
//      |  edge cell   ^  halo                    |  edge cell   ^  halo
//      v              |                          v              |
//   ===================== barrier 'jacobi', phase k =====================
//                 host: the completion swaps the two edge cells
//
// Phase k: each kernel updates its half of the rod from iteration k-1 (its halo is the
// neighbour's edge cell), pushes its own edge cell and arrives at the barrier. Once both are in,
// the completion function (the host's step, once per phase, before anyone is released) moves
// each edge cell into the other kernel's ring as its next halo. The result is checked against the
// same stencil run serially. Run with POCL_DEVICES="pthread pthread" ./barrier_phases

#include "example_help.hpp"
#include <ringpipe/barrier.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace ringpipe;

constexpr std::uint32_t half = 1024, iterations = 500;
constexpr std::size_t cells = 2 * std::size_t{half};
constexpr float hot = 1.0F, cold = 0.0F; // the rod's two ends, held fixed

struct cell {
  std::uint32_t index, iteration;
  float value;
  std::uint32_t pad;
};

// One work-item per half; `grid` is the kernel's state: this half, then the next iteration's.
const char* jacobi_source = R"CL(
#include <ringpipe/barrier.clh>
typedef struct { uint index, iteration; float value; uint pad; } cell;
RINGPIPE_DEFINE_RING_OPS(cell)
RINGPIPE_DECLARE_SIZES(jacobi, 16, 16)
#define START(g) ((float)(((g) * 37u) % 101u) / 100.0f) // the rod's temperature at the start

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void jacobi(RINGPIPE_KERNEL_PARAMS, __global float* grid, __global rp_barrier_seat* seat, uint right,
            uint n, uint iterations, float edge) {
  rp_begin(ctl);
  __global float* now = grid;
  __global float* next = grid + n;
  for (uint i = 0; i < n; ++i) now[i] = START(i + right * n);
  float halo = START(right ? n - 1 : n); // the neighbour's edge cell at the start
  for (uint k = 0; k < iterations; ++k) {
    cell c;
    if (k > 0) {
      while (!rp_try_pop_cell(in, &c)) {} // the completion pushed it before releasing us
      halo = c.value;
    }
    const float left_of_first = right ? halo : edge, right_of_last = right ? edge : halo;
    for (uint i = 0; i < n; ++i)
      next[i] = 0.5f * ((i == 0 ? left_of_first : now[i - 1]) + (i + 1 == n ? right_of_last : now[i + 1]));
    __global float* t = now; now = next; next = t;
    c.index = right ? 0 : n - 1; c.iteration = k; c.value = now[c.index];
    rp_try_push_cell(out, &c); // the ring has room: the completion empties it every phase
    const uint why = rp_barrier_wait(seat, ctl, rp_barrier_arrive(seat));
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
  }
  for (uint i = 0; i < n; ++i) { // the result, one cell per message
    cell c = {i, iterations, now[i], 0};
    while (!rp_try_push_cell(out, &c)) {}
  }
  rp_close(out);
  rp_end(ctl, RP_STATE_STOPPED);
}
)CL";

std::vector<float> serial() {
  std::vector<float> now(cells), next(cells);
  for (std::uint32_t g = 0; g < cells; ++g)
    now[g] = static_cast<float>((g * 37U) % 101U) / 100.0F; // START(g) in the kernel
  for (std::uint32_t k = 0; k < iterations; ++k) {
    for (std::size_t i = 0; i < now.size(); ++i)
      next[i] = 0.5F * ((i == 0 ? hot : now[i - 1]) + (i + 1 == now.size() ? cold : now[i + 1]));
    now.swap(next);
  }
  return now;
}

int main(int argc, char** argv) try {
  if (int c = examples::help_or_refuse(argc, argv, "Heat stencil on two devices in barrier phases."); c >= 0) return c;
  runtime rt;
  std::vector<const device*> shared; // kernels that wait on the device need shared memory
  for (const auto& d : rt.devices().devices())
    if (d.info().svm.fine_buffer && d.info().svm.atomics) shared.push_back(&d);
  if (shared.empty()) throw std::runtime_error("no device with fine-grained SVM and SVM atomics (install PoCL)");
  if (shared.size() < 2) std::printf("only one device with shared memory found: both halves run on it\n");
  const device& left_dev = *shared.front();
  const device& right_dev = *shared[shared.size() > 1 ? 1 : 0];
  using half_kernel = ring_kernel<cell, cell>;
  kernel_spec spec(jacobi_source, "jacobi");
  spec.state_bytes = static_cast<std::uint32_t>(cells * sizeof(float));
  half_kernel left(rt, left_dev, spec), right(rt, right_dev, spec);
  for (auto* k : {&left, &right}) {
    k->set_arg(1, static_cast<std::uint32_t>(k == &right));
    k->set_arg(2, half);
    k->set_arg(3, iterations);
    k->set_arg(4, k == &right ? cold : hot);
  }
  // Halos in, edge cells and results out; 2 * half slots hold a whole half.
  ring<cell> left_in(left_dev, 4), right_in(right_dev, 4);
  ring<cell> left_out(left_dev, 2 * half), right_out(right_dev, 2 * half);
  barrier_options options;
  options.name = "jacobi";
  options.on_phase = [&](std::uint32_t) {
    cell from_left{}, from_right{};
    if (!left_out.try_pop(from_left) || !right_out.try_pop(from_right) || !left_in.try_push(from_right) ||
        !right_in.try_push(from_left))
      throw std::runtime_error("an edge cell is missing"); // fails the barrier for both kernels
  };
  barrier phases({{left, 0, "left half"}, {right, 0, "right half"}}, options);
  left.start(left_in, left_out);
  right.start(right_in, right_out);
  left.wait(std::chrono::seconds(60));
  right.wait(std::chrono::seconds(60));

  const auto expected = serial();
  double worst = 0;
  for (auto* out : {&left_out, &right_out}) {
    cell c{};
    for (std::uint32_t got = 0; got < half; ++got) {
      if (!out->try_pop(c)) throw std::runtime_error("a result cell is missing");
      const std::size_t at = c.index + (out == &right_out ? half : 0);
      worst = std::max(worst, static_cast<double>(std::fabs(c.value - expected[at])));
    }
  }
  std::printf("%srod of %zu cells, %u iterations on %s and %s\n", phases.stats().table().c_str(), cells, iterations,
              left_dev.label().c_str(), right_dev.label().c_str());
  if (worst > 1e-6) {
    std::printf("FAILED: the devices' rod differs from the serial one by %g\n", worst);
    return 1;
  }
  std::printf("OK: %u phases, largest difference from the serial stencil %g\n", iterations, worst);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "barrier_phases: %s\n", e.what());
  return 1;
}
