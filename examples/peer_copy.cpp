// peer_copy: an array copied from one device to another, direct where the two share memory and
// staged through pinned host memory where they do not, with the bandwidth of each beside a host
// memcpy of the same bytes.
//
//   device 0 ──memcpy, shared memory──────────────────► device 1        (direct: PoCL x2)
//   device 0 ──read──► pinned host chunk ──write──► device 2           (staged: PoCL -> rusticl)
//
// ringpipe picks the path (choose_copy, the same rule as pipeline links); the transfer report
// counts each copy per pair and path. Every copy is checked byte for byte.
// Run with POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./peer_copy

#include "example_help.hpp"
#include <ringpipe/array.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace ringpipe;

constexpr std::size_t count = std::size_t{16} << 20; // 64 MiB of floats
constexpr int repeats = 5;

double gb_per_s(std::size_t bytes, std::chrono::steady_clock::duration d) {
  return static_cast<double>(bytes) / std::chrono::duration<double>(d).count() / 1e9;
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "Direct and staged copies between devices."); c >= 0) return c;
  try {
    runtime rt;
    if (rt.devices().size() < 2)
      std::printf("only one device: copying within it (POCL_DEVICES=\"pthread pthread\" gives two)\n");
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = static_cast<float>(i % 4099) * 0.25f;
    const std::size_t bytes = count * sizeof(float);
    std::vector<float> copy_of(count);
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r)
      std::memcpy(copy_of.data(), values.data(), bytes);
    std::printf("host memcpy:                %6.2f GB/s\n",
                gb_per_s(bytes * repeats, std::chrono::steady_clock::now() - t0));

    const device& from = rt.device_at(0);
    device_array<float> source(rt, from, count, "source");
    source.write(values);
    std::size_t wrong = 0;
    for (const auto& to : rt.devices()) {
      if (to.index() == from.index() && rt.devices().size() > 1) continue;
      device_array<float> target(rt, to, count, "target");
      copy(source, target); // the first copy builds nothing but warms the path
      t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < repeats; ++r)
        copy(source, target);
      const double rate = gb_per_s(bytes * repeats, std::chrono::steady_clock::now() - t0);
      std::vector<float> back(count);
      target.read(back);
      wrong += back == values ? 0 : 1;
      std::printf("device 0 -> device %zu (%s): %6.2f GB/s, %s, can_access: %s\n  to %s\n", to.index(),
                  std::string(to_string(choose_copy(link_end::on(from), link_end::on(to)))).c_str(), rate,
                  back == values ? "byte-exact" : "DIFFERENT", can_access(to, from) ? "yes" : "no", to.label().c_str());
    }
    std::printf("what moved, per pair of ends and path:\n%s", rt.transfers().table().c_str());
    if (wrong != 0) {
      std::printf("FAILED: %zu copies differ\n", wrong);
      return 1;
    }
    std::printf("OK: %zu MiB copied to %zu device(s), every copy byte-exact\n", bytes >> 20,
                std::max<std::size_t>(1, rt.devices().size() - 1));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_copy: %s\n", e.what());
    return 1;
  }
}
