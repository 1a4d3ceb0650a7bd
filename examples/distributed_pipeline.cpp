// distributed_pipeline: one stream through three processes (MPI ranks). Every rank declares the
// same pipeline and places its stages on ranks; each runs its own, and every connection between
// ranks becomes a remote link (ringpipe::mpi) with credit-based flow control.
//
//   rank 0            rank 1                 rank 2                  rank 0
//   source ==link==>  scale (ring kernel) ==link==> offset (ring kernel) ==link==> check
//
//   mpirun -n 3 ./distributed_pipeline           (one machine; add --oversubscribe on fewer cores)
//   mpirun -n 3 --hostfile hosts ./distributed_pipeline    (several machines, see the README)

#include "example_help.hpp"
#include <ringpipe/mpi/distributed_pipeline.hpp>
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

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "One stream through three MPI ranks (mpirun -n 3)."); c >= 0)
    return c;
  try {
    mpi::world w(argc, argv);
    if (w.size() != 3) {
      std::fprintf(stderr, "distributed_pipeline: run on 3 ranks (mpirun -n 3), not %d\n", w.size());
      return 1;
    }
    runtime rt;
    // The same declaration on every rank; only the stages placed on a rank run there.
    pipeline p(rt, {.name = "three-ranks"});
    auto src = p.add_source<sample>("source", [n = 0u]() mutable -> std::optional<sample> {
      if (n == count) return std::nullopt;
      const std::uint32_t s = n++;
      return sample{s, static_cast<float>(s % 1000)};
    });
    auto scale = p.add_kernel<sample, sample>("scale", {stages_source, "scale_stage"});
    auto offset = p.add_kernel<sample, sample>("offset", {stages_source, "offset_stage"});
    std::uint32_t next = 0, wrong = 0;
    auto check = p.add_sink<sample>("check", [&](const sample& m) {
      if (m.seq != next++ || m.value != 2.0f * static_cast<float>(m.seq % 1000) + 1.0f) ++wrong;
    });
    p.connect(src.out(), scale.in());
    p.connect(scale.out(), offset.in());
    p.connect(offset.out(), check.in());
    p.on_rank(scale, 1);
    p.on_rank(offset, 2);

    mpi::distributed_pipeline d(w, p);
    const auto started = std::chrono::steady_clock::now();
    d.run(10min);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (w.rank() != 0) {
      std::printf("%s", d.plan().c_str()); // this rank's part, and its remote links
      return 0;
    }
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
