// producer_consumer: a ring kernel on one device feeds a ring kernel on another.
//
//   device 0                          device 1                       host
//   +-----------------+   link        +-----------------+            +---------+
//   | producer kernel | ------------> | consumer kernel | ---------> | summary |
//   | produce         | direct/staged | verify          | 1 message  | sink    |
//   +-----------------+               +-----------------+            +---------+
//
// The producer writes messages 0..N-1, each with a check word. The consumer checks on the device
// that they arrive in order with the right check words, sums them, and at the end of the stream
// emits one summary, which the host compares with the count and checksum it expects.
// Both kernels are this example's own (kernels/producer_consumer.cl, embedded at build time).
//
//   producer_consumer [--staged] [--count N] [--objective automatic|latency|throughput] [--duration SECONDS]
//                     [--dot FILE]
//     --staged     force a staged link (a host copy) even where a direct one is possible
//     --objective  what the pipeline is tuned for (default automatic: the planner chooses and says why)
//     --duration   soak: run pipelines back to back for this long, then report loss and memory
//     --dot        write the pipeline's graph after the run (Graphviz: dot -Tsvg FILE -o graph.svg)

#include "example_help.hpp"
#include <ringpipe/detail/embedded_sources.hpp>
#include <ringpipe/ringpipe.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace ringpipe;

namespace ringpipe::detail {
std::span<const embedded_source> producer_consumer_kernels() noexcept; // generated from kernels/
}

namespace {

// Host mirrors of the kernels' types (kernels/producer_consumer.cl).
struct msg {
  std::uint32_t seq, check, payload[2];
};
struct summary_msg {
  std::uint64_t count, sum;
  std::uint32_t expected, errors, first_error, pad;
};
static_assert(sizeof(msg) == 16 && sizeof(summary_msg) == 32);

constexpr std::uint32_t demo_check(std::uint32_t seq) { return seq * 2654435761u ^ 0x5bd1e995u; }
std::uint64_t expected_sum(std::uint32_t count) {
  std::uint64_t sum = 0;
  for (std::uint32_t s = 0; s < count; ++s)
    sum += demo_check(s);
  return sum;
}

std::string kernel_source() { return std::string(detail::producer_consumer_kernels()[0].text); }

struct run_result {
  bool ok = false;
  std::uint64_t messages = 0;
  double seconds = 0;
  pipeline_metrics metrics;
  std::string objective; // the plan's head: the objective and why
  std::string dot;       // the graph after the run
};

long resident_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

run_result run_once(runtime& rt, std::uint32_t count, bool staged, pipeline_objective objective, live_view& view) {
  const std::size_t consumer_device = rt.devices().size() > 1 ? 1 : 0;
  pipeline_options options;
  options.name = "producer_consumer";
  options.objective = objective;
  view.attach(options); // rates per link while it runs: a table on a terminal, lines otherwise
  pipeline p(rt, options);

  kernel_spec producer_spec(kernel_source(), "produce");
  producer_spec.args = {kernel_arg::of(count)};         // how many messages to produce
  kernel_spec consumer_spec(kernel_source(), "verify"); // declares its state: the running totals

  auto producer = p.add_kernel<no_message, msg>("producer", producer_spec, on_device(0));
  auto consumer = p.add_kernel<msg, summary_msg>("consumer", consumer_spec, on_device(consumer_device));
  summary_msg summary{};
  int summaries = 0;
  auto sink = p.add_sink<summary_msg>("summary", [&](const summary_msg& s) {
    summary = s;
    ++summaries;
  });
  link_options link;
  if (staged) link.kind = link_kind::staged;
  p.connect(producer.out(), consumer.in(), link);
  p.connect(consumer.out(), sink.in());

  const auto t0 = std::chrono::steady_clock::now();
  p.run();
  run_result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.metrics = p.metrics();
  const std::string plan = p.plan(); // its head: the objective, and why kernels park if they do
  const auto park = plan.find(" park: ");
  r.objective = plan.substr(0, plan.find('\n', park == std::string::npos ? 0 : park));
  r.dot = p.dot();
  r.messages = summary.count;
  r.ok = summaries == 1 && summary.count == count && summary.errors == 0 && summary.sum == expected_sum(count);
  if (!r.ok) {
    std::printf("FAIL: %d summaries; consumer saw %llu of %u messages, %u out of order or corrupt (first at seq "
                "%u), checksum %llu, expected %llu\n",
                summaries, static_cast<unsigned long long>(summary.count), count, summary.errors, summary.first_error,
                static_cast<unsigned long long>(summary.sum), static_cast<unsigned long long>(expected_sum(count)));
  }
  return r;
}

// A soak's running totals, written by the application thread and read by the live view's footer.
struct soak_totals {
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double duration = 0;
  std::atomic<int> runs{0};
  std::atomic<std::uint64_t> messages{0}, lost{0};
  std::string line() const {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char text[256];
    std::snprintf(text, sizeof text,
                  "soak %.0f of %.0f s: %d runs, %llu messages (%.1f M msgs/s), lost %llu, "
                  "resident %ld KiB",
                  s, duration, runs.load(), static_cast<unsigned long long>(messages.load()),
                  static_cast<double>(messages.load()) / s / 1e6, static_cast<unsigned long long>(lost.load()),
                  resident_kib());
    return text;
  }
};

// Whole pipelines back to back for `duration` seconds, counting every message.
int soak(runtime& rt, std::uint32_t count, bool staged, pipeline_objective objective, double duration) {
  const long rss_start = resident_kib();
  long rss_first = rss_start;
  soak_totals totals{.duration = duration};
  live_view view({.title = "soak", .footer = [&] { return totals.line(); }}); // totals under the table
  while (std::chrono::steady_clock::now() < totals.started + std::chrono::duration<double>(duration)) {
    const auto r = run_once(rt, count, staged, objective, view);
    totals.messages += r.messages;
    totals.lost += count - std::min<std::uint64_t>(r.messages, count);
    if (++totals.runs == 1) rss_first = resident_kib();
    if (!r.ok) return 1;
  }
  view.end();
  // Growth is measured from the end of the first run: it builds the kernels and warms the pools.
  const long rss_end = resident_kib();
  const auto lost = totals.lost.load();
  std::printf("%s: %d runs, %llu messages, lost %llu, resident memory %ld KiB at start, %ld KiB after the first run, "
              "%ld KiB at end (%+.1f%% since the first run)\n",
              lost == 0 ? "OK" : "FAIL", totals.runs.load(), static_cast<unsigned long long>(totals.messages.load()),
              static_cast<unsigned long long>(lost), rss_start, rss_first, rss_end,
              100.0 * static_cast<double>(rss_end - rss_first) / static_cast<double>(rss_first));
  return lost == 0 ? 0 : 1;
}

bool parse_objective(const char* text, pipeline_objective& objective) {
  for (const auto o : {pipeline_objective::automatic, pipeline_objective::latency, pipeline_objective::throughput}) {
    if (to_string(o) == text) {
      objective = o;
      return true;
    }
  }
  return false;
}

} // namespace

int main(int argc, char** argv) {
  bool staged = false;
  std::uint32_t count = 10'000'000;
  double duration = 0;
  const char* dot_file = nullptr;
  auto objective = pipeline_objective::automatic;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--staged"))
      staged = true;
    else if (!std::strcmp(argv[i], "--count") && i + 1 < argc) {
      const auto n = examples::parse_count(argv[++i]);
      if (!n) return examples::refuse_value(argv[0], "--count", "a count from 1 to 4294967295", argv[i]);
      count = *n;
    } else if (!std::strcmp(argv[i], "--duration") && i + 1 < argc) {
      const auto d = examples::parse_seconds(argv[++i]);
      if (!d) return examples::refuse_value(argv[0], "--duration", "seconds above 0", argv[i]);
      duration = *d;
    } else if (!std::strcmp(argv[i], "--dot") && i + 1 < argc) {
      dot_file = argv[++i];
    } else if (!std::strcmp(argv[i], "--objective") && i + 1 < argc && parse_objective(argv[i + 1], objective))
      ++i;
    else {
      const bool help = !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h");
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--staged] [--count N] [--objective automatic|latency|throughput] [--duration SECONDS]\n"
                   "          [--dot FILE]\n"
                   "  Streams N messages (default 10,000,000) from a producer kernel to a consumer kernel on\n"
                   "  two devices where there are two, checks every one, and prints rates and the plan.\n"
                   "  --staged       the link copied through pinned host memory even where memory is shared\n"
                   "  --objective    what the planner aims for (default automatic: it says what it chose)\n"
                   "  --duration S   a soak: pipelines back to back for S seconds, then loss and memory\n"
                   "  --dot FILE     the pipeline's graph after the run (not a soak's), for Graphviz\n"
                   "exit codes: 0 every message arrived, in order; 1 a check or the run failed; 2 bad arguments.\n",
                   argv[0]);
      return help ? 0 : 2;
    }
  }
  if (dot_file != nullptr && duration > 0) {
    std::fprintf(stderr, "%s: --dot draws one run's graph, not a soak's (--duration)\n", argv[0]);
    return 2;
  }
  std::ofstream dot; // opened before the run: a path it cannot write is refused at once
  if (dot_file != nullptr && !examples::open_output(dot, dot_file, argv[0])) return 2;
  try {
    runtime rt;
    const auto& devices = rt.devices();
    std::printf("producer on %s\n", devices[0].label().c_str());
    if (devices.size() > 1) {
      std::printf("consumer on %s\n", devices[1].label().c_str());
    } else {
      std::printf("consumer on the same device: only one device found (POCL_DEVICES=\"pthread pthread\" gives two)\n");
    }

    if (duration > 0) return soak(rt, count, staged, objective, duration);

    live_view view({.title = "producer_consumer", .keep = false}); // the final tables follow
    const auto r = run_once(rt, count, staged, objective, view);
    view.end();
    std::printf("\n%s\n\n%s\n", r.objective.c_str(), r.metrics.table().c_str());
    if (dot_file != nullptr) {
      if (!examples::finish_output(dot, r.dot, dot_file)) return 1;
      std::printf("graph written to %s (dot -Tsvg %s -o pipeline.svg)\n", dot_file, dot_file);
    }
    if (!r.ok) return 1;
    // The whole run; the live lines above rate the link alone, so the line says why its rate is lower.
    std::printf("OK: %llu messages in order with the expected checksum, %.2f M msgs/s from start to end (kernel "
                "builds and launches included) over a %s link\n",
                static_cast<unsigned long long>(r.messages), static_cast<double>(r.messages) / r.seconds / 1e6,
                std::string(to_string(r.metrics.links[0].kind)).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
