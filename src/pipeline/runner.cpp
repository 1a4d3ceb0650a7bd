#include "runner.hpp"

#include "../actor/stages.hpp"
#include "../actor/strand_executor.hpp"
#include "../core/slow_step.hpp"

#include <algorithm>
#include <cstdio>

namespace ringpipe::detail {
namespace {

std::shared_ptr<ring_buffer> make_ring(const std::optional<device>& near, std::uint32_t capacity,
                                       std::uint32_t slot_size, const std::string& name) {
  if (near) return std::make_shared<ring_buffer>(*near, capacity, slot_size, ring_options{name});
  return std::make_shared<ring_buffer>(capacity, slot_size, ring_options{name});
}

} // namespace

runner::runner(runtime& rt, const graph& g, plan p, const pipeline_options& options)
    : rt_(rt), g_(g), plan_(std::move(p)), options_(options), stages_(g.stages.size()), links_(g.edges.size()) {
  events_->target = this;
}

runner::~runner() {
  halt("pipeline '" + g_.name + "' was destroyed");
  join(std::chrono::steady_clock::now() + options_.give_up_after);
  events_->with([](runner& r) { r.events_->target = nullptr; }); // stages left behind call nobody
  // Kernels stop in their destructors (at once, waiting for their launches to return), and may
  // notify this runner on the way: before its members go.
  for (auto& s : stages_)
    s.kernel.reset();
}

std::shared_ptr<host_stage> runner::add_actor(std::shared_ptr<host_stage> a) {
  // Under throughput nothing spins between runs: kernels run batched, and host stages back off
  // at once after a turn (the planner chose throughput because the busy threads exceed the cores;
  // on 2 cores a source's and a sink's spin windows cost a 16-byte stream 8-12%), sleeping as
  // long as their rate takes to bring a quarter of a ring or turn (a farm's dealer and merger beside slow
  // kernels took a quarter of a core waking every 50 us).
  if (plan_.objective == pipeline_objective::throughput) a->poll_for_throughput();
  a->on_failure = [events = events_, name = a->name()](const std::exception_ptr& e) {
    events->with([&](runner& r) { r.record_failure(name, e); });
  };
  a->on_exit = [events = events_] { events->with([](runner& r) { r.notify(); }); };
  actors_.push_back(a);
  return a;
}

void runner::start() {
  build_kernels();
  bind_kernels();
  realize_links();
  realize_stages();
  count_deliveries();
  wire_publish_wakes();
  try {
    for (auto& s : stages_)
      if (s.kernel) s.kernel->start_buffers(s.kernel_in, s.kernel_out);
  } catch (...) {
    halt("pipeline '" + g_.name + "' failed to start");
    throw;
  }
  start_time_ = std::chrono::steady_clock::now();
}

void runner::start_host_stages() {
  for (auto& a : actors_)
    a->start();
}

// A build error or a declared size that does not match the stage's message types is refused
// here, before anything runs.
void runner::build_kernels() {
  for (std::size_t i = 0; i < g_.stages.size(); ++i) {
    const auto& s = g_.stages[i];
    const auto& ps = plan_.stages[i];
    if (!s.is_kernel() || ps.fused_into) continue;
    try {
      const auto& dev = rt_.devices()[*ps.device];
      slow_step notice(rt_, "pipeline '" + g_.name + "': stage '" + s.name + "': building kernel '" + ps.spec.name +
                                "' on device '" + dev.name() +
                                "' (the OpenCL driver compiles it; a first build with a cold cache can take minutes)");
      stages_[i].kernel = std::make_unique<ring_kernel_base>(rt_, dev, ps.spec, s.in.size, ps.out.size, ps.kernel_opts);
      if (ps.prefer_parked) stages_[i].kernel->prefer_parked(ps.leave_when_idle);
    } catch (const build_error& e) {
      throw build_error(e, "pipeline '" + g_.name + "': stage '" + s.name + "'"); // keeps the log
    } catch (const ringpipe::error& e) {
      throw error(e.code(), "pipeline '" + g_.name + "': stage '" + s.name + "': " + e.what());
    }
    // A kernel's failure fails the pipeline at once, whether or not anyone is in wait().
    stages_[i].kernel->on_exit([events = events_, i] {
      events->with([i](runner& r) {
        if (auto f = r.stages_[i].kernel->failure()) r.record_failure(r.g_.stages[i].name, f);
        r.notify();
      });
    });
  }
}

// The rings of every link, where the plan says: one ring near the kernel end that polls it (the
// consumer's if both), or a ring near each end and a mover between them.
void runner::realize_links() {
  const auto& topo = rt_.devices();
  for (std::size_t ei = 0; ei < g_.edges.size(); ++ei) {
    const auto& l = plan_.links[ei];
    if (l.kind == link_kind::fused) continue;
    const auto& e = g_.edges[ei];
    auto& lr = links_[ei];
    const std::uint32_t capacity = plan_.links[ei].capacity;
    const auto slot = static_cast<std::uint32_t>(plan_.stages[l.from].out.size);
    const std::string name = e.ring_name();
    const auto dev = [&](const std::optional<std::size_t>& d) { return d ? std::optional(topo[*d]) : std::nullopt; };
    const auto prod = dev(l.producer_dev);
    const auto cons = dev(l.consumer_dev);
    if (!l.mover) {
      lr.consumer_ring = make_ring(cons ? cons : prod, capacity, slot, name);
      lr.producer_ring = lr.consumer_ring;
      continue;
    }
    if (prod && cons) {
      lr.producer_ring = make_ring(prod, capacity, slot, name + ".out");
      lr.consumer_ring = make_ring(cons, capacity, slot, name + ".in");
    } else {
      lr.consumer_ring = make_ring(cons ? cons : prod, capacity, slot, name);
      lr.producer_ring = make_ring(prod, capacity, slot, name + ".staging");
    }
    lr.mover = add_actor(std::make_shared<mover_stage>(std::make_shared<strand_executor>(rt_.io()), name + " (staged)",
                                                       default_staging_batch(options_, plan_.objective, slot)));
    lr.mover->add_input(lr.producer_ring);
    lr.mover->add_output(lr.consumer_ring, kernel_waker(cons ? stages_[e.to].kernel.get() : nullptr));
    auto* input = lr.mover->inputs().back().get();
    lr.delivered = [input] { return input->popped.load(std::memory_order_relaxed); };
  }
}

// Each stage's side of its connections: kernels with several inputs or outputs get a merging or
// splitting mover; host stages become actors.
void runner::realize_stages() {
  const auto& topo = rt_.devices();
  auto executor = [&] { return std::make_shared<strand_executor>(rt_.io()); };
  auto turn = [&](std::size_t msg_bytes) { return default_staging_batch(options_, plan_.objective, msg_bytes); };
  auto fan = [](fan_out f) { return f == fan_out::round_robin ? fan_policy(round_robin{}) : fan_policy(broadcast{}); };
  for (std::size_t i = 0; i < g_.stages.size(); ++i) {
    const auto& s = g_.stages[i];
    const auto& ps = plan_.stages[i];
    auto& sr = stages_[i];
    if (ps.fused_into) continue;
    if (s.is_kernel()) {
      const auto& d = topo[*ps.device];
      if (!s.in.none()) {
        if (s.in_edges.size() == 1) {
          sr.kernel_in = links_[s.in_edges[0]].consumer_ring;
        } else {
          sr.kernel_in = make_ring(d, default_capacity(options_, plan_.objective, s.in.size),
                                   static_cast<std::uint32_t>(s.in.size), s.in_port() + ".merged");
          auto merge = add_actor(std::make_shared<mover_stage>(executor(), s.in_port() + " (merge)", turn(s.in.size)));
          for (const auto ei : s.in_edges)
            merge->add_input(links_[ei].consumer_ring);
          merge->add_output(sr.kernel_in, kernel_waker(sr.kernel.get()));
        }
      }
      if (!ps.out.none()) {
        if (ps.out_edges.size() == 1) {
          sr.kernel_out = links_[ps.out_edges[0]].producer_ring;
        } else {
          sr.kernel_out = make_ring(d, default_capacity(options_, plan_.objective, ps.out.size),
                                    static_cast<std::uint32_t>(ps.out.size), s.out_port() + ".split");
          auto split =
              add_actor(std::make_shared<mover_stage>(executor(), s.out_port() + " (split)", turn(ps.out.size)));
          split->set_fan(fan(s.policy));
          split->add_input(sr.kernel_out);
          for (const auto ei : ps.out_edges)
            split->add_output(links_[ei].producer_ring);
        }
      }
      continue;
    }
    if (s.kind == stage_kind::inlet) {
      sr.port = links_[s.out_edges[0]].producer_ring;
      continue;
    }
    if (s.kind == stage_kind::outlet) {
      sr.port = links_[s.in_edges[0]].consumer_ring;
      continue;
    }
    std::shared_ptr<host_stage> actor;
    if (s.kind == stage_kind::dealer || s.kind == stage_kind::merger)
      actor = farm_actor(s, turn(s.in.size));
    else if (s.kind == stage_kind::source)
      actor = std::make_shared<source_stage>(executor(), s.name, turn(s.out.size), s.generate);
    else if (s.kind == stage_kind::sink)
      actor = std::make_shared<sink_stage>(executor(), s.name, turn(s.in.size), s.consume);
    else
      actor = std::make_shared<transform_stage>(executor(), s.name, turn(std::max(s.in.size, s.out.size)), s.transform);
    actor->set_fan(fan(s.policy));
    for (const auto ei : s.in_edges)
      actor->add_input(links_[ei].consumer_ring);
    for (const auto ei : s.out_edges) {
      const auto to = g_.edges[ei].to;
      const bool feeds_kernel = !links_[ei].mover && g_.stages[to].is_kernel() && g_.stages[to].in_edges.size() == 1;
      actor->add_output(links_[ei].producer_ring, kernel_waker(feeds_kernel ? stages_[to].kernel.get() : nullptr));
    }
    sr.actor = add_actor(actor);
  }
}

// What each connection's consumer side has taken.
void runner::count_deliveries() {
  for (std::size_t ei = 0; ei < g_.edges.size(); ++ei) {
    auto& lr = links_[ei];
    if (lr.delivered || plan_.links[ei].kind == link_kind::fused) continue;
    const auto to = g_.edges[ei].to;
    const auto& b = g_.stages[to];
    if (const auto& actor = stages_[to].actor) {
      const auto k = static_cast<std::size_t>(std::find(b.in_edges.begin(), b.in_edges.end(), ei) - b.in_edges.begin());
      auto* input = actor->inputs()[k].get();
      lr.delivered = [input] { return input->popped.load(std::memory_order_relaxed); };
    } else if (b.is_kernel() && b.in_edges.size() == 1) {
      auto* k = stages_[to].kernel.get();
      lr.delivered = [k] { return k->stats().msgs_in; };
    } else {
      auto r = lr.consumer_ring;
      lr.delivered = [r] { return r->popped(); };
    }
  }
}

void runner::notify() noexcept {
  { std::lock_guard lock(mutex_); }
  changed_.notify_all();
}

void runner::record_failure(const std::string& stage, const std::exception_ptr& e) {
  std::string what = "unknown exception";
  std::error_code code = make_error_code(errc::stage_failed);
  try {
    std::rethrow_exception(e);
  } catch (const ringpipe::error& x) {
    what = x.what();
    code = x.code();
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  const std::string failed = "stage '" + stage + "' failed: " + what;
  const std::string message = "pipeline '" + g_.name + "': " + failed;
  {
    std::lock_guard lock(mutex_);
    if (first_failure_) return;
    first_failure_ = std::make_exception_ptr(error(code, message));
    failure_after_stop_ = stopped_ != nullptr;
    if (failure_after_stop_ && code != make_error_code(errc::cancelled)) failed_after_stop_ = failed;
  }
  changed_.notify_all();
  halt(message);
}

std::exception_ptr runner::failure() const {
  std::lock_guard lock(mutex_);
  return first_failure_;
}

std::exception_ptr runner::ended_by() const {
  if (!stopped_ || (first_failure_ && !failure_after_stop_)) return first_failure_;
  if (failed_after_stop_.empty()) return stopped_;
  return std::make_exception_ptr(
      error(errc::cancelled, "pipeline '" + g_.name + "' was stopped; after the stop, " + failed_after_stop_));
}

void runner::halt(const std::string& reason) noexcept {
  for (auto& a : actors_)
    a->stop();
  for (auto& s : stages_)
    if (s.kernel) s.kernel->stop_now();
  cancel_rings(reason);
}

void runner::cancel_rings(const std::string& reason) noexcept {
  for (auto& l : links_)
    for (const auto* r : {&l.producer_ring, &l.consumer_ring})
      if (*r) (*r)->cancel(reason);
  for (auto& s : stages_)
    for (const auto* r : {&s.kernel_in, &s.kernel_out, &s.port})
      if (*r) (*r)->cancel(reason);
}

void runner::join(std::chrono::steady_clock::time_point deadline) {
  const auto left = [&] { return std::max(deadline - std::chrono::steady_clock::now(), std::chrono::nanoseconds(0)); };
  // On an io thread (a host function that stops its pipeline), the stages and kernel proxies that
  // must leave may need a thread to run on: another runs while this one waits.
  const auto stand_in = rt_.stand_in_thread();
  // A stage whose function called this (a sink that stops the pipeline) leaves when it returns.
  for (auto& a : actors_)
    if (!a->in_function_on_this_thread() && !a->wait_exited(left()))
      std::fprintf(stderr,
                   "ringpipe: pipeline '%s': stage '%s' has not left (its function has not returned, or no runtime "
                   "thread ran its last step); given up on\n",
                   g_.name.c_str(), a->name().c_str());
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    auto& k = stages_[i].kernel;
    if (k && !stages_[i].given_up && !k->wait_exited(left())) {
      stages_[i].given_up = true;
      std::fprintf(stderr, "ringpipe: pipeline '%s': kernel stage '%s' has not returned; detached\n", g_.name.c_str(),
                   g_.stages[i].name.c_str());
      k->detach();
    }
  }
}

// Whether a stage has seen the end of its stream (a stage that consumes a mover's output can only
// finish after the mover has, so movers need no check of their own).
bool runner::finished(std::size_t i) const {
  const auto& s = stages_[i];
  if (s.actor) return s.actor->finished.load();
  if (s.kernel) return s.kernel->state() == kernel_state::stopped;
  if (g_.stages[i].kind == stage_kind::outlet) return s.port->drained();
  if (g_.stages[i].kind == stage_kind::inlet) return s.port->closed();
  return true; // fused into another stage's kernel
}

void runner::wait(std::chrono::nanoseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // Stages on the runtime notify when they finish, leave or fail. Inlets and outlets are driven
  // by the application, which tells nobody: with those, look again every 2 ms.
  const bool application_ports = std::any_of(g_.stages.begin(), g_.stages.end(), [](const stage_decl& s) {
    return s.kind == stage_kind::inlet || s.kind == stage_kind::outlet;
  });
  // Waited for on an io thread (a host function that runs a pipeline of its own): the stages
  // need a thread to run on while this one waits.
  const auto stand_in = rt_.stand_in_thread();
  std::unique_lock lock(mutex_);
  for (;;) {
    lock.unlock();
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      if (stages_[i].kernel)
        if (auto f = stages_[i].kernel->failure()) record_failure(g_.stages[i].name, f);
      // An inlet or outlet cancelled by whoever drives it (a remote link whose peer failed): the
      // pipeline fails with its reason instead of waiting for a stream that will not come.
      if (const auto& port = stages_[i].port; port && port->cancelled())
        record_failure(g_.stages[i].name, std::make_exception_ptr(error(
                                              errc::cancelled, "ring '" + port->name() + "' was cancelled by " +
                                                                   "the code driving it: " + port->cancel_reason())));
    }
    lock.lock();
    // A failure, or a stop by any thread (a host function of this pipeline too), ends the wait
    // at once, once the stages have left (up to give_up_after).
    // Decided once they have: a host function that stopped its pipeline and then threw has
    // failed by then, whichever this thread saw first.
    if (first_failure_ || stopped_) {
      lock.unlock();
      join(clock::now() + options_.give_up_after);
      lock.lock();
      std::rethrow_exception(ended_by());
    }
    bool done = true;
    for (std::size_t i = 0; i < stages_.size() && done; ++i)
      done = finished(i);
    if (done) return;
    const auto now = clock::now();
    if (now >= deadline) {
      lock.unlock();
      std::string pending;
      for (std::size_t i = 0; i < stages_.size(); ++i)
        if (!finished(i)) pending += (pending.empty() ? "" : ", ") + stage_label(i) + " (" + why_running(i) + ")";
      throw error(errc::timeout,
                  "pipeline '" + g_.name + "' did not finish within " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                      " ms; still running: " + pending);
    }
    changed_.wait_until(lock, application_ports ? std::min(deadline, now + std::chrono::milliseconds(2)) : deadline);
  }
}

stop_report runner::stop() noexcept {
  const std::string reason = "pipeline '" + g_.name + "' was stopped";
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) stopped_ = std::make_exception_ptr(error(errc::cancelled, reason));
  }
  changed_.notify_all();
  halt(reason);
  join(std::chrono::steady_clock::now() + options_.give_up_after);
  // A host function that called this is still in its run: the report counts that run as the
  // stage will leave it when the function returns.
  for (const auto& a : actors_)
    if (a->in_function_on_this_thread()) return undelivered(a.get(), a->stop_inside_turn());
  return undelivered(nullptr, {});
}

} // namespace ringpipe::detail
