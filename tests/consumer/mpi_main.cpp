// Uses the installed component ringpipe::mpi: one pipeline declared for one rank, run by
// mpi::distributed_pipeline (a singleton MPI process: no connection between ranks).
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/ringpipe.hpp>

#include <cstdio>
#include <optional>

int main(int argc, char** argv) {
  try {
    ringpipe::mpi::world w(argc, argv);
    ringpipe::runtime rt;
    ringpipe::pipeline p(rt, {.name = "consumer"});
    std::uint32_t sum = 0;
    auto src = p.add_source<std::uint32_t>("numbers", [n = 0u]() mutable -> std::optional<std::uint32_t> {
      return n < 100 ? std::optional(n++) : std::nullopt;
    });
    auto sink = p.add_sink<std::uint32_t>("sum", [&](std::uint32_t v) { sum += v; });
    p.connect(src.out(), sink.in());
    ringpipe::mpi::distributed_pipeline(w, p).run(std::chrono::seconds(60));
    std::printf("%s: sum %u\n", w.describe().c_str(), sum);
    return sum == 4950 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_consumer: %s\n", e.what());
    return 1;
  }
}
