// Run as a child process by failure_test: a pipeline whose kernel never returns ("hang": PoCL;
// llvmpipe ends every loop of a launch after 65535 iterations, so no kernel hangs there), or
// whose healthy batches are reported stalled while they run ("slow": a 1 ms stall timeout, for
// devices that run batches through mirrors). Prints how long wait(), stop() and the pipeline's and
// runtime's destructors took, then returns 0; the parent checks the times and that this process
// exits at all.

#include <ringpipe/ringpipe.hpp>

#include <test_message.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string_view>

using namespace ringpipe;
using msg = test_message<16>;
using clock_type = std::chrono::steady_clock;

namespace {
long ms_since(clock_type::time_point t) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count());
}
} // namespace

int main(int argc, char** argv) {
  const bool slow = argc > 1 && std::string_view(argv[1]) == "slow";
  auto t = clock_type::now();
  {
    runtime rt;
    {
      pipeline p(rt, {"stuck"});
      std::uint32_t next = 0;
      auto src = p.add_source<msg>("src", [&]() -> std::optional<msg> { return make_test_message<16>(next++); });
      kernel_spec spec(test_stages_source(16), slow ? "test_map" : "test_hang");
      if (!slow) spec.args = {kernel_arg::of(std::uint32_t{10}), kernel_arg::of(std::uint64_t{1} << 40)};
      kernel_options options;
      options.stall_timeout = std::chrono::milliseconds(slow ? 1 : 500);
      options.first_launch_timeout = std::chrono::milliseconds(slow ? 1 : 60000);
      auto k = p.add_kernel<msg, msg>("stuck", spec, on_device(0), options);
      auto sink = p.add_sink<msg>("sink", [](const msg&) {});
      p.connect(src.out(), k.in());
      p.connect(k.out(), sink.in());
      p.start();
      t = clock_type::now();
      try {
        p.wait(std::chrono::seconds(60));
        std::printf("wait returned\n");
        return 1;
      } catch (const ringpipe::error& e) {
        std::printf("wait threw after %ld ms: %s\n", ms_since(t), e.what());
      }
      t = clock_type::now();
      const auto report = p.stop();
      std::printf("stop took %ld ms: %s\n", ms_since(t), report.text().c_str());
      t = clock_type::now();
    }
    std::printf("pipeline destructor took %ld ms\n", ms_since(t));
    t = clock_type::now();
  }
  std::printf("runtime destructor took %ld ms\n", ms_since(t));
  std::fflush(stdout);
  return 0;
}
