// ringpipe-litmus: whether a resident kernel and the host can exchange messages through memory the
// host keeps mapped while the kernel runs (include/ringpipe/mapped_litmus.hpp), on every device,
// for every kind of such memory and both device fences: a stream through 256-slot rings, then a
// ping-pong (one slot) that times each round trip. Prints one line per run; --json writes them.

#include "tool_output.hpp"

#include <ringpipe/detail/json.hpp>
#include <ringpipe/mapped_litmus.hpp>
#include <ringpipe/opencl.hpp>
#include <ringpipe/topology.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

using namespace ringpipe;
using detail::json_string;

namespace {

const char* const usage = "usage: ringpipe-litmus [--messages N] [--filter TEXT] [--json FILE]\n"
                          "  For each device and each of alloc_host_ptr, use_host_ptr, coarse_svm memory (with\n"
                          "  mem_fence, and NVIDIA's membar.sys where the device is NVIDIA's): N messages streamed\n"
                          "  through 256-slot rings (default 1000000), then N/10 round trips through one slot.\n"
                          "exit codes: 0 every run that could run held, 1 one failed or an error, 2 bad arguments.\n";

struct run_record {
  std::string device, memory, fence, error;
  std::uint32_t capacity = 0;
  litmus_result result;
};

std::string json_of(const std::vector<run_record>& runs) {
  std::ostringstream o;
  o << "{\"runs\": [";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& x = runs[i];
    const auto& r = x.result;
    o << (i ? "," : "") << "\n  {\"device\": " << json_string(x.device) << ", \"memory\": " << json_string(x.memory)
      << ", \"fence\": " << json_string(x.fence) << ", \"capacity\": " << x.capacity
      << ", \"error\": " << json_string(x.error) << ", \"not_run\": " << json_string(r.not_run)
      << ", \"holds\": " << std::boolalpha << r.holds() << ", \"sent\": " << r.sent
      << ", \"device_received\": " << r.device_received << ", \"host_received\": " << r.host_received
      << ", \"device_stale\": " << r.device_stale << ", \"device_torn\": " << r.device_torn
      << ", \"host_stale\": " << r.host_stale << ", \"host_torn\": " << r.host_torn
      << ", \"device_gave_up\": " << r.device_gave_up << ", \"host_gave_up\": " << r.host_gave_up
      << ", \"device_polls\": " << r.device_polls << ", \"device_highest_head\": " << r.device_highest_head
      << ", \"device_saw_stop\": " << r.device_saw_stop << ", \"host_saw_start\": " << r.host_saw_start
      << ", \"launch_status_at_start\": " << json_string(r.launch_status_at_start)
      << ", \"launch_wait_ms\": " << r.launch_wait_ms
      << ", \"launch_status_at_stop\": " << json_string(r.launch_status_at_stop) << ", \"seconds\": " << r.seconds
      << ", \"msgs_per_s\": " << r.messages_per_second() << ", \"round_trip_p50_us\": " << r.round_trip_us(50)
      << ", \"round_trip_p99_us\": " << r.round_trip_us(99) << "}";
  }
  o << "\n]}\n";
  return o.str();
}

} // namespace

int main(int argc, char** argv) {
  std::uint32_t messages = 1'000'000;
  std::string json_path;
  discovery_options discovery;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--messages") && i + 1 < argc) {
      char* end = nullptr;
      const auto n = std::strtoul(argv[++i], &end, 10);
      if (*end != '\0' || n == 0 || n > 0xffffffffu) {
        std::cerr << "ringpipe-litmus: --messages takes a count from 1 to 4294967295, not '" << argv[i] << "'\n";
        return 2;
      }
      messages = static_cast<std::uint32_t>(n);
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      discovery.device_filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << usage;
      return 0;
    } else {
      std::cerr << "ringpipe-litmus: unknown argument '" << argv[i] << "'\n" << usage;
      return 2;
    }
  }
  if (const auto why = json_path.empty() ? std::string() : tools::cannot_write(json_path); !why.empty()) {
    std::cerr << "ringpipe-litmus: " << why << "\n";
    return 2;
  }
  std::vector<run_record> runs;
  bool all_held = true;
  try {
    const auto topo = topology::discover(discovery);
    for (const auto& dev : topo.devices())
      for (auto memory : {mapped_memory::alloc_host_ptr, mapped_memory::use_host_ptr, mapped_memory::coarse_svm})
        for (auto fence : {device_fence::memory_fence, device_fence::system_fence})
          for (std::uint32_t capacity : {256u, 1u}) {
            litmus_options o;
            o.memory = memory;
            o.fence = fence;
            o.capacity = capacity;
            o.messages = capacity == 1 ? std::max(1u, messages / 10) : messages;
            run_record x{dev.label(), std::string(to_string(memory)), std::string(to_string(fence)), {}, capacity, {}};
            try {
              x.result = run_mapped_litmus(dev, o);
            } catch (const cl::Error& e) {
              x.error = std::string(e.what()) + " " + opencl_error_name(e.err());
            } catch (const ringpipe::error& e) {
              x.error = e.what();
            }
            const bool ran = x.error.empty() && x.result.not_run.empty();
            all_held = all_held && (!ran ? x.error.empty() : x.result.holds());
            std::cout << x.device << " | " << x.memory << " | " << x.fence << " | " << capacity << " slot"
                      << (capacity == 1 ? "" : "s") << " | "
                      << (x.error.empty() ? x.result.summary() : "error: " + x.error) << std::endl;
            runs.push_back(std::move(x));
          }
  } catch (const ringpipe::error& e) {
    std::cerr << "ringpipe-litmus: " << e.what() << "\n";
    return 1;
  }
  if (!tools::stdout_written()) {
    std::cerr << "ringpipe-litmus: cannot write to standard output\n";
    return 1;
  }
  if (const auto why = json_path.empty() ? std::string() : tools::write_whole(json_path, json_of(runs)); !why.empty()) {
    std::cerr << "ringpipe-litmus: " << why << "\n";
    return 1;
  }
  return all_held ? 0 : 1;
}
