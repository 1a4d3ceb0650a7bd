// A producer kernel streaming to a verifying consumer kernel: on one device, and across two over each link kind.

#include "bench.hpp"

namespace ringpipe::bench {
namespace {

// Messages per stream for an N-byte message: about 160 MB (16 MB quick) of payload, at least
// 400,000 (50,000 quick) so that the stream outlasts the pipeline's start (about 2 ms), at most 10 M.
std::uint32_t stream_count(std::size_t bytes, const settings& s) {
  const std::size_t budget = s.quick ? (16u << 20) : (160u << 20);
  return static_cast<std::uint32_t>(
      std::clamp<std::size_t>(budget / bytes, s.quick ? 50'000 : 400'000, s.quick ? 1'000'000 : 10'000'000));
}

// A producer kernel on `from` streams to a verifying consumer kernel on `to`; returns msgs/s
// (from start() to the consumer's summary) and the link kind the pipeline used.
template <std::size_t N>
std::pair<double, link_kind> kernel_stream(runtime& rt, std::size_t from, std::size_t to, std::optional<link_kind> kind,
                                           std::uint32_t count, const settings& s) {
  using msg = test_message<N>;
  pipeline_options options;
  options.name = "bench";
  options.capacity = static_cast<std::uint32_t>(std::clamp<std::size_t>((4u << 20) / N, 64, 1024));
  const auto view = watch(s, options);
  pipeline p(rt, options);
  kernel_spec producer(test_stages_source(N), "test_source");
  producer.args = {kernel_arg::of(count)};
  kernel_spec consumer(test_stages_source(N), "test_verify");
  consumer.state_bytes = sizeof(test_summary);
  consumer.args = {kernel_arg::of(std::uint32_t{0})};
  auto a = p.add_kernel<no_message, msg>("producer", producer, on_device(from));
  auto b = p.add_kernel<msg, test_summary>("consumer", consumer, on_device(to));
  test_summary sum{};
  auto sink = p.add_sink<test_summary>("summary", [&](const test_summary& x) { sum = x; });
  link_options link;
  link.kind = kind;
  p.connect(a.out(), b.in(), link);
  p.connect(b.out(), sink.in());
  const auto t0 = clock_type::now();
  p.run(10min);
  const double secs = seconds_since(t0);
  if (sum.count != count || sum.errors != 0 || sum.sum != test_checksum(count, 0))
    throw std::runtime_error("kernel stream of " + std::to_string(N) + "-byte messages: " + std::to_string(sum.count) +
                             " of " + std::to_string(count) + " arrived, " + std::to_string(sum.errors) + " errors");
  if (s.verbose) std::cerr << p.metrics().table();
  return {count / secs, p.metrics().links[0].kind};
}

// A short stream first, untimed: each message size is its own program, which the device builds at
// its first use (about 40 ms for PoCL here, longer than the timed stream of 4 KiB messages).
template <std::size_t N>
void build_first(runtime& rt, std::size_t from, std::size_t to, std::optional<link_kind> kind, const settings& s) {
  (void)kernel_stream<N>(rt, from, to, kind, 64, s);
}

template <std::size_t N> void kernel_to_kernel(runtime& rt, const settings& s, std::vector<result>& out) {
  result r{"kernel_to_kernel", {{"msg_bytes", std::to_string(N)}}, {}};
  const auto count = stream_count(N, s);
  build_first<N>(rt, 0, 0, std::nullopt, s);
  const auto [rate, kind] = kernel_stream<N>(rt, 0, 0, std::nullopt, count, s);
  add_stream_metrics(r, 1, N, 1.0 / rate);
  r.params["link"] = std::string(to_string(kind));
  out.push_back(r);
  std::cerr << "  kernel_to_kernel " << N << " B: " << rate << " msgs/s\n";
}

template <std::size_t N> void cross_device(runtime& rt, const settings& s, std::vector<result>& out) {
  if (rt.devices().size() < 2) {
    std::cerr << "  cross_device: needs two devices (POCL_DEVICES=\"pthread pthread\"); not measured\n";
    return;
  }
  for (const auto kind : {link_kind::direct, link_kind::staged}) {
    if (kind == link_kind::direct &&
        !(rt.device_at(0).shares_context_with(rt.device_at(1)) && rt.device_at(0).info().svm.fine_buffer &&
          rt.device_at(1).info().svm.fine_buffer)) {
      std::cerr << "  cross_device direct: devices 0 and 1 share no fine-grained SVM; not measured\n";
      continue;
    }
    result r{"cross_device", {{"msg_bytes", std::to_string(N)}, {"link", std::string(to_string(kind))}}, {}};
    build_first<N>(rt, 0, 1, kind, s);
    const auto [rate, used] = kernel_stream<N>(rt, 0, 1, kind, stream_count(N, s), s);
    add_stream_metrics(r, 1, N, 1.0 / rate);
    out.push_back(r);
    std::cerr << "  cross_device " << N << " B " << to_string(used) << ": " << rate << " msgs/s\n";
  }
}

} // namespace

void kernel_links_topic(bench_context& c) {
  if (c.selected("kernel_to_kernel")) {
    kernel_to_kernel<16>(c.rt, c.s, c.results);
    kernel_to_kernel<256>(c.rt, c.s, c.results);
  }
  if (c.selected("cross_device")) {
    cross_device<16>(c.rt, c.s, c.results);
    cross_device<256>(c.rt, c.s, c.results);
    cross_device<4096>(c.rt, c.s, c.results);
    cross_device<65536>(c.rt, c.s, c.results);
  }
}

} // namespace ringpipe::bench
