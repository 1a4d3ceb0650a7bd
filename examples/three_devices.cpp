// three_devices: a longer pipeline mixing host and kernel stages over three devices.
//
//   host          PoCL #0          host          PoCL #1           rusticl            host
//   +--------+    +-------+    +--------+    +--------+    +-----------+    +--------+
//   | sensor | -> | scale | -> |  clip  | -> | square | -> | threshold | -> | report |
//   +--------+    +-------+    +--------+    +--------+    +-----------+    +--------+
//    source       kernel        host fn       kernel        kernel filter    sink
//
// The kernels are written here with RINGPIPE_MAP_KERNEL: a per-message OpenCL C function that the
// scaffold runs as a ring kernel (return false to drop a message). The runtime picks each link:
// direct between the PoCL devices (shared SVM), staged to and from rusticl (no SVM). Without
// three devices, stages share the devices there are. Run with
//   POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./three_devices [--dot FILE]
// (--dot: the pipeline's graph after the run, for Graphviz: dot -Tsvg FILE -o graph.svg).

#include "example_help.hpp"
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace ringpipe;

struct sample {
  std::uint32_t seq;
  float value;
};

// The same struct in OpenCL C, and the three kernels.
const char* kernels = R"CL(
#include <ringpipe/stage.clh>
typedef struct { uint seq; float value; } sample;

inline bool scale(const sample* in, sample* out) { *out = *in; out->value = in->value * 2.5f; return true; }
inline bool square(const sample* in, sample* out) { *out = *in; out->value = in->value * in->value; return true; }
inline bool threshold(const sample* in, sample* out) { *out = *in; return in->value > 2500.0f; }

RINGPIPE_MAP_KERNEL(scale_kernel, sample, sample, scale)
RINGPIPE_MAP_KERNEL(square_kernel, sample, sample, square)
RINGPIPE_MAP_KERNEL(threshold_kernel, sample, sample, threshold)
)CL";

float reading(std::uint32_t seq) { return static_cast<float>(seq % 100); } // the sensor's signal
float expected(std::uint32_t seq) {                                        // what the pipeline computes
  const float clipped = std::min(reading(seq) * 2.5f, 200.0f);
  return clipped * clipped;
}

int main(int argc, char** argv) {
  constexpr std::uint32_t count = 1'000'000;
  const bool dot = argc == 3 && !std::strcmp(argv[1], "--dot");
  if (argc != 1 && !dot) {
    const bool help = argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"));
    std::fprintf(help ? stdout : stderr,
                 "usage: %s [--dot FILE]\n  exit codes: 0 every sample right; 1 a failure; 2 bad arguments\n", argv[0]);
    return help ? 0 : 2;
  }
  std::ofstream dot_out; // opened first: a path it cannot write is refused before the run
  if (dot && !examples::open_output(dot_out, argv[2], argv[0])) return 2;
  try {
    runtime rt;
    // Two PoCL devices and rusticl where present; otherwise the devices there are, in turn.
    std::size_t pocl_a = 0, pocl_b = rt.devices().size() > 1 ? 1 : 0, other = rt.devices().size() - 1;
    for (const auto& d : rt.devices())
      if (d.info().platform == "rusticl") other = d.index();
    std::printf("scale on %s\nsquare on %s\nthreshold on %s\n", rt.device_at(pocl_a).label().c_str(),
                rt.device_at(pocl_b).label().c_str(), rt.device_at(other).label().c_str());

    pipeline p(rt, {"three_devices"});
    auto sensor = p.add_source<sample>("sensor", [seq = 0u]() mutable -> std::optional<sample> {
      if (seq == count) return std::nullopt;
      const sample s{seq, reading(seq)};
      ++seq;
      return s;
    });
    auto scale = p.add_kernel<sample, sample>("scale", {kernels, "scale_kernel"}, on_device(pocl_a));
    auto clip = p.add_host<sample, sample>("clip", [](sample s) {
      s.value = std::min(s.value, 200.0f);
      return s;
    });
    auto square = p.add_kernel<sample, sample>("square", {kernels, "square_kernel"}, on_device(pocl_b));
    auto threshold = p.add_kernel<sample, sample>("threshold", {kernels, "threshold_kernel"}, on_device(other));
    std::uint32_t kept = 0, wrong = 0, next = 0;
    auto report = p.add_sink<sample>("report", [&](const sample& s) {
      while (next < s.seq && !(expected(next) > 2500.0f)) // the samples the filter dropped
        ++next;
      if (s.seq != next || s.value != expected(s.seq)) ++wrong;
      next = s.seq + 1;
      ++kept;
    });
    p.connect(sensor.out(), scale.in());
    p.connect(scale.out(), clip.in());
    p.connect(clip.out(), square.in());
    p.connect(square.out(), threshold.in());
    p.connect(threshold.out(), report.in());
    p.run();

    std::printf("\n%s\n%s\n", p.plan().c_str(), p.metrics().table().c_str());
    if (dot && !examples::finish_output(dot_out, p.dot(), argv[2])) return 1; // the file opened before the run
    std::uint32_t should_keep = 0;
    for (std::uint32_t s = 0; s < count; ++s)
      should_keep += expected(s) > 2500.0f ? 1 : 0;
    if (wrong != 0 || kept != should_keep) {
      std::printf("FAIL: kept %u of %u samples (expected %u), %u wrong or out of order\n", kept, count, should_keep,
                  wrong);
      return 1;
    }
    std::printf("OK: %u of %u samples passed the threshold, each in order with the expected value\n", kept, count);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
