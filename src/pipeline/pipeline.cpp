// The pipeline handle: declaration calls build the graph; start() plans it and hands it to a
// runner.

#include "../core/farm_names.hpp"
#include "pipeline_impl.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace ringpipe {

namespace detail {

std::string demangle(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && readable != nullptr ? readable : name;
  std::free(readable);
  // "ringpipe::test_message<16ul>" reads better without the namespace and the suffix.
  for (const char* prefix : {"ringpipe::"})
    for (auto pos = s.find(prefix); pos != std::string::npos; pos = s.find(prefix))
      s.erase(pos, std::strlen(prefix));
  for (auto pos = s.find("ul>"); pos != std::string::npos; pos = s.find("ul>"))
    s.erase(pos, 2);
  return s;
}

// "an inlet", "a sink".
std::string with_article(std::string_view word) {
  const bool vowel = !word.empty() && std::string_view("aeiou").find(word[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(word);
}

} // namespace detail

namespace {
// Ring capacities are checked where they are given, not at start().
void check_capacity(std::uint32_t capacity, const std::string& where) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0 || capacity > (1u << 30))
    throw error(errc::invalid_argument,
                where + ": capacity " + std::to_string(capacity) + " is not a power of two in [1, 2^30]");
}
// farm_options::ring left 0: 2,048 slots, fewer where that would pass 4 MiB, at least 256. Under
// the 4,096 from which a batched kernel on PoCL runs as spans (spans_worthwhile): a replica fed a
// few hundred costly items at a time did better as one launch that goes on while the dealer
// refills (the skewed farm of ringpipe-bench work_stealing: 204-210 ms at 2,048 slots, 231-246 ms
// at 4,096), and cheap items still come in launches of thousands.
std::uint32_t default_farm_ring(std::size_t message_bytes) {
  std::uint32_t slots = 2048;
  while (slots > 256 && std::size_t{slots} * message_bytes > (std::size_t{4} << 20))
    slots /= 2;
  return slots;
}
} // namespace

pipeline::pipeline(runtime& rt, pipeline_options options)
    : impl_(std::make_unique<detail::pipeline_impl>(rt, std::move(options))) {
  if (impl_->options.capacity != 0) // 0: the objective's
    check_capacity(impl_->options.capacity, "pipeline '" + impl_->options.name + "': pipeline_options::capacity");
}

pipeline::~pipeline() = default;

runtime& pipeline::rt() noexcept { return impl_->rt; }
const std::string& pipeline::name() const noexcept { return impl_->options.name; }

std::size_t pipeline::add_stage(std::string name, stage_kind kind, message_type in, message_type out) {
  if (impl_->run) throw error(errc::invalid_pipeline, "stage '" + name + "' added after start()");
  return impl_->g.add_stage(std::move(name), kind, std::move(in), std::move(out));
}

detail::stage_decl& pipeline::def(std::size_t id) { return impl_->g.stages.at(id); }
void pipeline::set_generate(std::size_t id, detail::generate_run fn) { def(id).generate = std::move(fn); }
void pipeline::set_transform(std::size_t id, detail::transform_run fn) { def(id).transform = std::move(fn); }
void pipeline::set_consume(std::size_t id, detail::consume_run fn) { def(id).consume = std::move(fn); }
void pipeline::set_kernel(std::size_t id, kernel_spec spec, placement where, kernel_options options) {
  auto& s = def(id);
  s.spec = std::move(spec);
  s.where = where;
  s.kernel_opts = options;
}

std::pair<std::size_t, std::size_t> pipeline::add_farm_stages(const std::string& name, const message_type& in,
                                                              const message_type& out, const kernel_spec& spec,
                                                              farm_options farm, kernel_options options) {
  const std::string what = "pipeline '" + impl_->options.name + "': farm '" + name + "'";
  const auto& topo = impl_->rt.devices();
  if (farm.devices.empty())
    for (std::size_t d = 0; d < topo.size(); ++d)
      farm.devices.push_back(d);
  if (farm.devices.empty()) throw error(errc::no_device, what + ": no device to run replicas on");
  for (const auto d : farm.devices)
    if (d >= topo.size())
      throw error(errc::invalid_pipeline,
                  what + ": no device " + std::to_string(d) + " (the runtime has " + std::to_string(topo.size()) + ")");
  if (farm.queue == 0) throw error(errc::invalid_argument, what + ": farm_options::queue must be > 0");
  if (farm.ring == 0) farm.ring = default_farm_ring(in.size);
  check_capacity(farm.ring, what + ": farm_options::ring");
  if (farm.feed_ahead.count() <= 0)
    throw error(errc::invalid_argument, what + ": farm_options::feed_ahead must be > 0");
  auto ledger = std::make_shared<detail::farm_ledger>(farm.devices.size());
  const auto deal = add_stage(detail::dealer_name(name), stage_kind::dealer, in, in);
  const auto merge = add_stage(detail::merger_name(name), stage_kind::merger, out, out);
  def(deal).farm = def(merge).farm = ledger;
  def(merge).farm_opts = farm;
  for (std::size_t k = 0; k < farm.devices.size(); ++k) {
    const auto replica = add_stage(detail::replica_name(name, k), stage_kind::kernel, in, out);
    set_kernel(replica, spec, on_device(farm.devices[k]), options);
    connect_ids(deal, replica, {std::nullopt, farm.ring});
    connect_ids(replica, merge, {});
  }
  def(deal).farm_opts = std::move(farm);
  return {deal, merge};
}

void pipeline::connect_ids(std::size_t from, std::size_t to, link_options options) {
  if (impl_->run) throw error(errc::invalid_pipeline, "connect() after start()");
  if (options.capacity != 0) // 0: the pipeline's default
    check_capacity(options.capacity, "pipeline '" + impl_->options.name + "': connection " + def(from).out_port() +
                                         " -> " + def(to).in_port());
  impl_->g.connect(from, to, options);
}

void pipeline::connect(const std::string& from, const std::string& to, link_options options) {
  auto& g = impl_->g;
  auto stage_of = [&](const std::string& port, const char* suffix) {
    const auto dot = port.find('.');
    if (dot != std::string::npos && port.substr(dot) != suffix)
      throw error(errc::invalid_pipeline, "'" + port + "' is not a port: write '" + port.substr(0, dot) + suffix + "'");
    return g.find(port.substr(0, dot));
  };
  const auto a = stage_of(from, ".out");
  const auto b = stage_of(to, ".in");
  auto& sa = def(a);
  auto& sb = def(b);
  if (sa.out.none()) throw error(errc::invalid_pipeline, "stage '" + sa.name + "' has no output port");
  if (sb.in.none()) throw error(errc::invalid_pipeline, "stage '" + sb.name + "' has no input port");
  if (sa.out.type != sb.in.type || sa.out.size != sb.in.size) {
    throw error(errc::message_size, "cannot connect '" + sa.out_port() + "' (" + detail::type_text(sa.out) + ") to '" +
                                        sb.in_port() + "' (" + detail::type_text(sb.in) +
                                        "): the message types differ");
  }
  connect_ids(a, b, options);
}

void pipeline::set_fan_out(const std::string& stage, fan_out policy) { set_fan_out_id(impl_->g.find(stage), policy); }
void pipeline::set_fan_out_id(std::size_t stage, fan_out policy) { def(stage).policy = policy; }

pipeline_plan pipeline::dry_run() const {
  if (impl_->ranks != 0) {
    const auto part = detail::project(impl_->g, impl_->rank, impl_->ranks, impl_->rank_weights);
    return detail::make_plan(part.local, impl_->rt.devices(), impl_->options, impl_->host()).summary(part.local);
  }
  return detail::make_plan(impl_->g, impl_->rt.devices(), impl_->options, impl_->host()).summary(impl_->g);
}

void pipeline::start() {
  auto& p = *impl_;
  if (p.run) throw error(errc::invalid_pipeline, "pipeline '" + p.options.name + "' was already started");
  if (p.options.on_metrics && p.options.metrics_every <= std::chrono::milliseconds(0))
    throw error(errc::invalid_argument, "pipeline '" + p.options.name + "': metrics_every is " +
                                            std::to_string(p.options.metrics_every.count()) +
                                            " ms; the metrics callback needs a positive interval");
  if (p.ranks != 0) p.part = std::make_unique<detail::rank_part>(detail::project(p.g, p.rank, p.ranks, p.rank_weights));
  const auto& g = p.graph_run();
  auto planned = detail::make_plan(g, p.rt.devices(), p.options, p.host());
  // Held before the stages start, so that they run at once from their first turn.
  auto threads = planned.threads.one_thread_reason.empty()
                     ? p.rt.hold_threads(static_cast<unsigned>(planned.threads.total()))
                     : p.rt.narrow_threads();
  auto run = std::make_unique<detail::runner>(p.rt, g, std::move(planned), p.options);
  run->start();
  // Held before a host function runs: one may call metrics() or plan() from its first call, on
  // a runtime thread, which the post of its first turn orders after this store.
  p.run = std::move(run);
  p.threads = std::move(threads);
  if (p.options.on_metrics) // before a host function may stop the pipeline, which finishes it
    p.watch = std::make_unique<detail::metrics_watch>(
        p.rt, p.options.name, p.options.metrics_every, [&p] { return p.run->metrics(); }, p.options.on_metrics);
  p.run->start_host_stages();
}

std::exception_ptr pipeline::failure() const { return impl_->run ? impl_->run->failure() : nullptr; }

void pipeline::wait(std::chrono::nanoseconds timeout) {
  if (!impl_->run) throw error(errc::invalid_pipeline, "pipeline '" + impl_->options.name + "' was never started");
  try {
    impl_->run->wait(timeout);
  } catch (const error& e) {
    // Still running after a timeout: the callbacks go on, on the threads it holds.
    if (e.code() != make_error_code(errc::timeout)) impl_->ended();
    throw;
  }
  impl_->ended(); // a narrowing hold no longer keeps the runtime on one thread
}

stop_report pipeline::stop() noexcept {
  if (!impl_->run) return {};
  auto report = impl_->run->stop();
  impl_->ended();
  return report;
}

std::shared_ptr<ring_buffer> pipeline::port_ring(const std::string& name, const message_type& type, bool inlet) {
  const auto& g = impl_->graph_run();
  const auto id = g.find(name);
  const auto& s = g.stages[id];
  const auto want = inlet ? stage_kind::inlet : stage_kind::outlet;
  if (s.kind != want)
    throw error(errc::invalid_argument, "stage '" + name + "' is " + detail::with_article(to_string(s.kind)) +
                                            ", not " + detail::with_article(to_string(want)));
  const auto& t = inlet ? s.out : s.in;
  if (t.type != type.type)
    throw error(errc::message_size, std::string(inlet ? "inlet" : "outlet") + " '" + name + "' carries " +
                                        detail::type_text(t) + ", not " + detail::type_text(type));
  if (!impl_->run)
    throw error(errc::invalid_pipeline, "pipeline '" + impl_->options.name + "': the ring of " +
                                            (inlet ? "inlet '" : "outlet '") + name +
                                            "' exists after start(); call start() first");
  return impl_->run->port(id);
}

void pipeline::on_kernels_built(std::function<void(const built_kernels&)> fn) {
  if (impl_->run)
    throw error(errc::invalid_pipeline, "pipeline '" + impl_->options.name + "': on_kernels_built after start()");
  impl_->g.on_kernels_built.push_back(std::move(fn));
}

void pipeline::keep_resident(std::string stage) {
  if (impl_->run)
    throw error(errc::invalid_pipeline, "pipeline '" + impl_->options.name + "': keep_resident after start()");
  impl_->g.resident.push_back(std::move(stage));
}

void pipeline::add_barrier_metrics(std::function<barrier_stats()> stats) {
  impl_->g.barrier_metrics.push_back(std::move(stats));
}

pipeline_metrics pipeline::metrics() const { return impl_->run ? impl_->run->metrics() : pipeline_metrics{}; }

std::string pipeline::plan() const { return impl_->run ? impl_->run->plan_text() : std::string(); }

} // namespace ringpipe
