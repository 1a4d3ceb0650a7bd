// multi_device_reduce: a histogram of samples spread over every device: each device counts its own
// samples into its own bins (a partial result), then one all-reduce adds the bins of all devices,
// so every device holds the whole histogram, and a reduce brings it to the host.
//
//   device 0: samples 0..S-1   ──count──► bins0 ┐
//   device 1: samples S..2S-1  ──count──► bins1 ├─ all_reduce(sum) ─► every bins_d = the histogram
//   device 2: ...              ──count──► bins2 ┘                    └ reduce(sum) ─► host
//
// Each device's array holds its samples and then its bins; the collectives work on the bins alone
// (a sub-range of each array). The result is checked against a histogram counted on the host.
// Run with POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./multi_device_reduce

#include "example_help.hpp"
#include <ringpipe/collective.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/ring.hpp>

#include <cstdio>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;

struct count_job {
  std::uint32_t first, count, samples, bins;
};

const char* count_source = R"CL(
#include <ringpipe/stage.clh>
typedef struct { uint first, count, samples, bins; } count_job;
inline bool count_range(const count_job* j, count_job* done, __global uint* data) {
  for (uint i = j->first; i < j->first + j->count; ++i) atomic_inc(&data[j->samples + data[i] % j->bins]);
  *done = *j;
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(count_jobs, count_job, count_job, __global uint*, count_range)
)CL";

constexpr std::uint32_t samples = 1u << 18, bins = 1000, job = 1024, jobs = samples / job;

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "Histograms per device, all-reduced, checked."); c >= 0) return c;
  try {
    runtime rt;
    std::vector<device_array<std::uint32_t>> data, partial;
    std::vector<std::uint32_t> expected(bins, 0);
    std::uint32_t x = 12345;
    for (const auto& d : rt.devices()) {
      // This device's samples, then its bins, zeroed.
      std::vector<std::uint32_t> host(samples + bins, 0);
      for (std::uint32_t i = 0; i < samples; ++i) {
        x = x * 1664525u + 1013904223u;
        host[i] = (x >> 8) % (bins * 3 / 2);
        ++expected[host[i] % bins];
      }
      data.emplace_back(rt, d, samples + bins, "samples+bins");
      data.back().write(host);
      partial.push_back(data.back().sub(samples, bins));
    }
    // Partial results: each device counts its own samples, in jobs through its ring kernel.
    for (std::size_t d = 0; d < data.size(); ++d) {
      const auto& dev = rt.device_at(d);
      ring_kernel<count_job, count_job> k(rt, dev, kernel_spec(count_source, "count_jobs"));
      k.set_arg(0, data[d]);
      ring<count_job> in(dev, jobs), out(dev, jobs);
      k.start(in, out);
      for (std::uint32_t j = 0; j < jobs; ++j)
        in.push({j * job, job, samples, bins}, 10s);
      in.close();
      for (std::uint32_t j = 0; j < jobs; ++j) {
        count_job done{};
        if (!out.pop(done, 60s)) throw error(errc::timeout, "no job came back from " + dev.label());
      }
      k.wait(60s);
    }
    // One collective: every device's bins become the sum of all devices' bins.
    all_reduce(partial, reduction<std::uint32_t>::sum(), {.name = "histogram"});
    // To the host: the bins are equal everywhere now, so their maximum is the histogram.
    std::vector<std::uint32_t> on_host(bins);
    reduce(partial, std::span<std::uint32_t>(on_host), reduction<std::uint32_t>::max());
    std::size_t wrong = on_host == expected ? 0 : 1;
    for (const auto& p : partial) {
      std::vector<std::uint32_t> got(bins);
      p.read(got);
      wrong += got == expected ? 0 : 1;
      std::printf("device %zu: %s, bin 0 holds %u\n", p.dev().index(), p.dev().label().c_str(), got[0]);
    }
    std::printf("what moved, per pair of ends and path:\n%s", rt.transfers().table().c_str());
    if (wrong != 0) {
      std::printf("FAILED: %zu histograms differ from the host's\n", wrong);
      return 1;
    }
    std::printf("OK: %zu devices x %u samples in %u bins, every device and the host hold the same histogram\n",
                data.size(), samples, bins);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multi_device_reduce: %s\n", e.what());
    return 1;
  }
}
