// vector_add: c = a + b over every device, the work dealt out in jobs of 1,024 elements, once in
// blocks and once cyclically, checked against the same sum on one device and on the host.
//
//   host ──jobs──► [ring] ──► add_jobs on device 0 ──done──► [ring] ──► host
//        ──jobs──► [ring] ──► add_jobs on device 1 ──done──► [ring] ──► host
//        ...                   each reads a and b and writes c in its own device array a|b|c
//
//   block:   device d takes jobs d*J/N .. (d+1)*J/N - 1       (neighbouring elements together)
//   cyclic:  job j goes to device j mod N                       (every device sees every region)
//
// Each device's array holds a, b and c back to back (written once, in place where the device
// shares memory with the host); the host reads back c for the jobs each device reports done.
// Run with POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=llvmpipe ./vector_add

#include "example_help.hpp"
#include <ringpipe/array.hpp>
#include <ringpipe/cpu_cores.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/ring.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace ringpipe;
using namespace std::chrono_literals;

struct add_job {
  std::uint32_t first, count, n, pad;
};
struct add_done {
  std::uint32_t first, count;
};

const char* add_source = R"CL(
#include <ringpipe/stage.clh>
typedef struct { uint first, count, n, pad; } add_job;
typedef struct { uint first, count; } add_done;
inline bool add_range(const add_job* j, add_done* d, __global float* abc) {
  for (uint i = j->first; i < j->first + j->count; ++i) abc[2 * j->n + i] = abc[i] + abc[j->n + i];
  d->first = j->first;
  d->count = j->count;
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(add_jobs, add_job, add_done, __global float*, add_range)
)CL";

constexpr std::uint32_t n = 1u << 20, job = 1024, jobs = n / job;

/// Runs every job on the device `owner(j)` names; returns c as the devices computed it.
template <class Owner>
std::vector<float> run(runtime& rt, const std::vector<const device*>& on, const std::vector<float>& ab, Owner owner) {
  std::vector<float> c(n);
  std::vector<device_array<float>> abc;
  std::vector<std::unique_ptr<ring_kernel<add_job, add_done>>> kernels;
  std::vector<std::unique_ptr<ring<add_job>>> in;
  std::vector<std::unique_ptr<ring<add_done>>> out;
  for (const auto* d : on) {
    abc.emplace_back(rt, *d, 3 * std::size_t{n}, "abc");
    abc.back().sub(0, 2 * std::size_t{n}).write(ab);
    kernels.push_back(std::make_unique<ring_kernel<add_job, add_done>>(rt, *d, kernel_spec(add_source, "add_jobs")));
    kernels.back()->set_arg(0, abc.back()); // the kernel keeps the array alive
    // Room for every job both ways: the host pushes them all before it pops a result.
    in.push_back(std::make_unique<ring<add_job>>(*d, jobs));
    out.push_back(std::make_unique<ring<add_done>>(*d, jobs));
    kernels.back()->start(*in.back(), *out.back());
  }
  std::vector<std::uint32_t> pending(on.size(), 0);
  for (std::uint32_t j = 0; j < jobs; ++j) {
    const std::size_t d = owner(j);
    in[d]->push({j * job, job, n, 0}, 10s);
    ++pending[d];
  }
  for (std::size_t d = 0; d < on.size(); ++d)
    in[d]->close();
  for (std::size_t d = 0; d < on.size(); ++d) {
    for (; pending[d] > 0; --pending[d]) {
      add_done done{};
      if (!out[d]->pop(done, 60s)) throw error(errc::timeout, "no job came back from " + on[d]->label());
      abc[d].sub(2 * std::size_t{n} + done.first, done.count).read(std::span(c).subspan(done.first, done.count));
    }
    kernels[d]->wait(60s);
  }
  return c;
}

int main(int argc, char** argv) {
  if (int c = examples::help_or_refuse(argc, argv, "c = a + b over every device, blocks and cyclic."); c >= 0) return c;
  try {
    runtime rt;
    std::vector<const device*> all;
    for (const auto& d : rt.devices())
      all.push_back(&d);
    std::vector<float> ab(2 * std::size_t{n});
    for (std::uint32_t i = 0; i < n; ++i) {
      ab[i] = static_cast<float>(i % 1000) * 0.5f;
      ab[n + i] = static_cast<float>(i % 7);
    }
    const auto count = static_cast<std::uint32_t>(all.size());
    run(rt, all, ab, [&](std::uint32_t j) { return j % count; }); // builds the kernel on every device first
    const auto t0 = std::chrono::steady_clock::now();
    const auto one = run(rt, {all[0]}, ab, [](std::uint32_t) { return 0u; });
    const auto t1 = std::chrono::steady_clock::now();
    const auto block = run(rt, all, ab, [&](std::uint32_t j) { return j * count / jobs; });
    const auto t2 = std::chrono::steady_clock::now();
    const auto cyclic = run(rt, all, ab, [&](std::uint32_t j) { return j % count; });
    const auto t3 = std::chrono::steady_clock::now();
    const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::size_t wrong = 0;
    for (std::uint32_t i = 0; i < n; ++i)
      wrong += (one[i] != ab[i] + ab[n + i]) + (block[i] != one[i]) + (cyclic[i] != one[i]);
    for (const auto* d : all)
      std::printf("device %zu: %s\n", d->index(), d->label().c_str());
    std::printf("one device %.1f ms, %u devices in blocks %.1f ms, cyclically %.1f ms\n", ms(t0, t1), count, ms(t1, t2),
                ms(t2, t3));
    if (const auto cores = cpu_devices_core_use(all, rt.host_cores()); cores.shared())
      std::printf("(%s, so more devices add no compute)\n", cores.describe().c_str());
    if (wrong != 0) {
      std::printf("FAILED: %zu elements differ\n", wrong);
      return 1;
    }
    std::printf("OK: %u elements, block and cyclic on %u devices equal one device and the host\n", n, count);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vector_add: %s\n", e.what());
    return 1;
  }
}
