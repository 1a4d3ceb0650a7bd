// The machine's state a throughput row depends on most on a virtual machine: how far apart the
// cores this process runs on are. A stream between a host thread and a CPU device's worker hands
// every cache line of its rings from one core to the other; on this project's 2-vCPU machine the
// hypervisor places the two vCPUs near (a line's round trip about 115 ns) or far (about 320 ns)
// for minutes at a time, and the 16-byte streams run about 2x (inlet/outlet) to 4x (sources and
// sinks) slower while they are far (docs/performance.md). Rows record it so that a slow run says
// which state it met.

#include "bench.hpp"

#include <atomic>
#include <thread>
#include <vector>

namespace ringpipe::bench {

double cores_round_trip_ns(std::chrono::milliseconds for_how_long) {
  if (detail::affinity_cpus() < 2) return 0; // one core: nothing is handed between cores
  // On lines of their own, so that the round trip is the hand-over alone.
  struct alignas(128) counter {
    std::atomic<std::uint64_t> value{0};
  };
  counter ping, pong;
  std::atomic<bool> done{false};
  // The answering thread spins: on a machine with spare cores it runs on another core than this
  // one, as a device worker does (two spinning threads on 2 vCPUs always do).
  std::thread answer([&] {
    std::uint64_t seen = 0;
    while (!done.load(std::memory_order_relaxed)) {
      const auto v = ping.value.load(std::memory_order_acquire);
      if (v != seen) pong.value.store(seen = v, std::memory_order_release);
    }
  });
  // The median of five windows: a window that another thread's last steps share (a pipeline's
  // teardown) reads far above the machine's state.
  std::uint64_t trips = 0;
  std::vector<double> windows;
  for (int w = 0; w < 5; ++w) {
    const auto t0 = clock_type::now();
    const auto first = trips;
    while (clock_type::now() - t0 < for_how_long / 5) {
      for (int i = 0; i < 16; ++i) {
        ping.value.store(++trips, std::memory_order_release);
        while (pong.value.load(std::memory_order_acquire) != trips) {
        }
      }
    }
    windows.push_back(std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() /
                      static_cast<double>(trips - first));
  }
  done.store(true, std::memory_order_relaxed);
  answer.join();
  return percentile(windows, 0.5);
}

} // namespace ringpipe::bench
