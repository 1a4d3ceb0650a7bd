// distributed_pipeline: one stream through three processes (MPI ranks), a ring kernel on each of
// ranks 1 and 2, the source and the checking sink on rank 0. Each rank runs its own pipeline;
// remote links (ringpipe::mpi) join them, with credit-based flow control.
//
//   rank 0                 rank 1                    rank 2                    rank 0
//   source -> [to-1] ==0==> [from-0] -> scale -> [to-2] ==1==> [from-1] -> offset -> [to-0] ==2==> [from-2] -> check
//
//   mpirun -n 3 ./distributed_pipeline           (one machine; add --oversubscribe on fewer cores)
//   mpirun -n 3 --hostfile hosts ./distributed_pipeline    (several machines, see the README)

#include <ringpipe/mpi/remote.hpp>
#include <ringpipe/ringpipe.hpp>

#include <cstdio>
#include <optional>

using namespace ringpipe;
using namespace std::chrono_literals;

struct sample {
  std::uint32_t seq;
  float value;
};

const char* const stages_source = R"(
#include <ringpipe/stage.clh>
typedef struct { uint seq; float value; } sample;
inline bool scale(const sample* in, sample* out) { *out = *in; out->value = 2.0f * in->value; return true; }
inline bool offset(const sample* in, sample* out) { *out = *in; out->value = in->value + 1.0f; return true; }
RINGPIPE_MAP_KERNEL(scale_stage, sample, sample, scale)
RINGPIPE_MAP_KERNEL(offset_stage, sample, sample, offset)
)";

constexpr std::uint32_t count = 1000000;

// A kernel rank: inlet from the rank before, the kernel, outlet to the rank after.
void kernel_rank(mpi::world& w, runtime& rt, const char* kernel, int from, int to, int link_in, int link_out) {
  pipeline p(rt, {.name = kernel});
  auto in = p.add_inlet<sample>("from");
  auto k = p.add_kernel<sample, sample>(kernel, {stages_source, kernel});
  auto out = p.add_outlet<sample>("to");
  p.connect(in.out(), k.in());
  p.connect(k.out(), out.in());
  p.start();
  mpi::remote_receiver rx(w, p.inlet<sample>("from"), from, link_in);
  mpi::remote_sender tx(w, p.outlet<sample>("to"), to, link_out);
  rx.wait(10min);
  tx.wait(10min);
  p.wait(1min);
  std::printf("%s: %s on %s: %llu messages\n", w.describe().c_str(), kernel, p.metrics().stages[1].device.c_str(),
              static_cast<unsigned long long>(tx.stats().messages));
}

int main(int argc, char** argv) {
  try {
    mpi::world w(argc, argv);
    if (w.size() != 3) {
      std::fprintf(stderr, "distributed_pipeline: run on 3 ranks (mpirun -n 3), not %d\n", w.size());
      return 1;
    }
    runtime rt;
    if (w.rank() == 1) kernel_rank(w, rt, "scale_stage", 0, 2, 0, 1);
    if (w.rank() == 2) kernel_rank(w, rt, "offset_stage", 1, 0, 1, 2);
    if (w.rank() != 0) return 0;
    pipeline p(rt, {.name = "ends"});
    auto src = p.add_source<sample>("source", [n = 0u]() mutable -> std::optional<sample> {
      if (n == count) return std::nullopt;
      const std::uint32_t s = n++;
      return sample{s, static_cast<float>(s % 1000)};
    });
    auto to = p.add_outlet<sample>("to");
    auto from = p.add_inlet<sample>("from");
    std::uint32_t next = 0, wrong = 0;
    auto check = p.add_sink<sample>("check", [&](const sample& m) {
      if (m.seq != next++ || m.value != 2.0f * static_cast<float>(m.seq % 1000) + 1.0f) ++wrong;
    });
    p.connect(src.out(), to.in());
    p.connect(from.out(), check.in());
    const auto started = std::chrono::steady_clock::now();
    p.start();
    mpi::remote_sender tx(w, p.outlet<sample>("to"), 1, 0);
    mpi::remote_receiver rx(w, p.inlet<sample>("from"), 2, 2);
    tx.wait(10min);
    rx.wait(10min);
    p.wait(1min);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%s: %u messages through ranks 1 and 2 and back in %.2f s (%.1f M msgs/s)\n", w.describe().c_str(),
                next, s, next / s / 1e6);
    if (next != count || wrong != 0) {
      std::printf("FAILED: %u of %u messages, %u wrong\n", next, count, wrong);
      return 1;
    }
    std::printf("OK: %u messages, in order, each scaled and offset once\n", count);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed_pipeline: %s\n", e.what());
    return 1;
  }
}
