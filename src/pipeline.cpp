#include <ringpipe/occupancy.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/runtime.hpp>

#include "host_actor.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

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

struct stage_def {
  std::string name;
  stage_kind kind;
  message_type in, out;
  std::function<bool(std::byte*)> generate;
  std::function<bool(const std::byte*, std::byte*)> transform;
  std::function<void(const std::byte*)> consume;
  kernel_spec spec;
  placement where;
  kernel_options kernel_opts;
  fan_out policy = fan_out::broadcast;
  std::vector<std::size_t> in_edges, out_edges;

  // realized by start()
  std::optional<device> dev;
  std::unique_ptr<ring_kernel_base> kernel;
  std::shared_ptr<ring_buffer> kernel_in, kernel_out;
  std::shared_ptr<host_actor> actor;
  std::shared_ptr<ring_buffer> port;     // inlets and outlets
  std::optional<std::size_t> fused_into; // runs inside that stage's kernel
  std::vector<std::string> fused_with;   // stages this one's kernel also runs

  std::string in_port() const { return name + ".in"; }
  std::string out_port() const { return name + ".out"; }
  bool is_kernel() const { return kind == stage_kind::kernel; }
};

struct edge_def {
  std::size_t from = 0, to = 0;
  std::string from_port, to_port; // as connected (fusion moves `from`)
  link_options options;
  // realized by start()
  link_kind kind = link_kind::direct;
  std::shared_ptr<ring_buffer> producer_ring; // where the producer side pushes
  std::shared_ptr<ring_buffer> consumer_ring; // where the consumer side pops (same ring unless staged)
  std::shared_ptr<host_actor> mover;          // staged: copies producer_ring -> consumer_ring
  std::function<std::uint64_t()> delivered;   // messages the consumer side has taken
};

struct pipeline_impl {
  pipeline_impl(runtime& r, pipeline_options o) : rt(r), options(std::move(o)) {}

  runtime& rt;
  pipeline_options options;
  std::vector<std::unique_ptr<stage_def>> stages;
  std::vector<edge_def> edges;
  std::vector<std::shared_ptr<host_actor>> actors; // every actor, movers included
  bool started = false;
  bool stopped = false;
  std::chrono::steady_clock::time_point start_time;

  mutable std::mutex mutex;
  std::exception_ptr first_failure;

  std::size_t find(const std::string& name) const {
    for (std::size_t i = 0; i < stages.size(); ++i)
      if (stages[i]->name == name) return i;
    throw error(errc::invalid_pipeline, "pipeline '" + options.name + "' has no stage named '" + name + "'");
  }

  void record_failure(const std::string& stage, const std::exception_ptr& e) {
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
    auto wrapped =
        std::make_exception_ptr(error(code, "pipeline '" + options.name + "': stage '" + stage + "' failed: " + what));
    {
      std::lock_guard lock(mutex);
      if (first_failure) return;
      first_failure = wrapped;
    }
    halt();
  }

  // Stops every actor and kernel at once; returns without waiting.
  void halt() noexcept {
    for (auto& a : actors)
      a->stop();
    for (auto& s : stages)
      if (s->kernel) s->kernel->stop_now();
  }

  // Waits for actors to leave their loops (they hold callbacks into this object) and for kernels'
  // launches to return.
  void join() {
    for (auto& a : actors)
      if (!a->wait_exited(std::chrono::seconds(30)))
        std::fprintf(stderr, "ringpipe: pipeline '%s': stage '%s' did not leave its function within 30 s\n",
                     options.name.c_str(), a->name.c_str());
    for (auto& s : stages)
      if (s->kernel && !s->kernel->wait_exited(std::chrono::seconds(10)))
        std::fprintf(stderr, "ringpipe: pipeline '%s': kernel stage '%s' did not stop within 10 s\n",
                     options.name.c_str(), s->name.c_str());
  }

  void validate();
  void check_budget();
  void place_kernels();
  void fuse();
  void build_kernels();
  void realize_links();
  void launch();
  std::string stage_label(const stage_def& s) const;

  // Whether a stage has seen the end of its stream (a stage that consumes a mover's output can
  // only finish after the mover has, so movers need no check of their own).
  static bool finished(const stage_def& s) {
    if (s.actor) return s.actor->finished.load();
    if (s.kernel) return s.kernel->state() == kernel_state::stopped;
    if (s.kind == stage_kind::outlet) return s.port->drained();
    if (s.kind == stage_kind::inlet) return s.port->closed();
    return true; // fused into another stage's kernel
  }
  static std::string why_running(const stage_def& s) {
    if (s.actor) return std::to_string(s.actor->queued()) + " messages queued";
    if (s.kernel)
      return std::string(to_string(s.kernel->state())) + ", " + std::to_string(s.kernel_in ? s.kernel_in->size() : 0) +
             " messages queued";
    if (s.kind == stage_kind::outlet)
      return std::to_string(s.port->size()) + " messages not yet popped by the application";
    return "not closed by the application";
  }
};

namespace {

bool shares_memory(const device& d) { return d.info().svm.fine_buffer && d.info().svm.atomics; }

// Whether a ring in memory `ring` can be polled by a kernel on `d` without a copy.
bool reachable(const ring_buffer& ring, const device& d) {
  return shares_memory(d) && ring.memory() == ring_memory::svm && ring.svm_context() == d.context()();
}

std::shared_ptr<ring_buffer> make_ring(const std::optional<device>& near, std::uint32_t capacity,
                                       std::uint32_t slot_size, const std::string& name) {
  if (near) return std::make_shared<ring_buffer>(*near, capacity, slot_size, ring_options{name});
  return std::make_shared<ring_buffer>(capacity, slot_size, ring_options{name});
}

std::string type_text(const message_type& t) { return t.name + " (" + std::to_string(t.size) + " bytes)"; }

} // namespace

void pipeline_impl::validate() {
  if (stages.empty()) throw error(errc::invalid_pipeline, "pipeline '" + options.name + "' has no stages");
  std::string problems;
  for (const auto& s : stages) {
    if (!s->in.none() && s->in_edges.empty()) problems += "\n  input port '" + s->in_port() + "' is not connected";
    if (!s->out.none() && s->out_edges.empty()) problems += "\n  output port '" + s->out_port() + "' is not connected";
    if (s->kind == stage_kind::inlet && s->out_edges.size() > 1)
      problems += "\n  inlet '" + s->name + "' feeds " + std::to_string(s->out_edges.size()) +
                  " connections; an inlet feeds one (add a host stage to fan out)";
    if (s->kind == stage_kind::outlet && s->in_edges.size() > 1)
      problems += "\n  outlet '" + s->name + "' is fed by " + std::to_string(s->in_edges.size()) +
                  " connections; an outlet takes one (add a host stage to merge)";
  }
  if (!problems.empty())
    throw error(errc::invalid_pipeline, "pipeline '" + options.name + "' is not fully connected:" + problems);

  // Cycles: depth-first search; the path of the first cycle found is named port by port.
  std::vector<int> color(stages.size(), 0);
  std::vector<std::size_t> path;
  std::function<void(std::size_t)> visit = [&](std::size_t v) {
    color[v] = 1;
    for (const auto e : stages[v]->out_edges) {
      const auto w = edges[e].to;
      if (color[w] == 1) {
        std::string cycle;
        auto first = static_cast<std::size_t>(
            std::find_if(path.begin(), path.end(), [&](std::size_t ed) { return edges[ed].from == w; }) - path.begin());
        path.push_back(e);
        for (; first < path.size(); ++first)
          cycle +=
              "\n  " + stages[edges[path[first]].from]->out_port() + " -> " + stages[edges[path[first]].to]->in_port();
        throw error(errc::invalid_pipeline, "pipeline '" + options.name + "' has a cycle:" + cycle);
      }
      if (color[w] == 0) {
        path.push_back(e);
        visit(w);
        path.pop_back();
      }
    }
    color[v] = 2;
  };
  for (std::size_t v = 0; v < stages.size(); ++v)
    if (color[v] == 0) visit(v);
}

// Forced persistent kernels beyond a pool's budget: refused before anything launches.
void pipeline_impl::check_budget() {
  std::map<std::string, std::vector<std::string>> forced;
  std::map<std::string, std::uint32_t> budget;
  for (const auto& s : stages) {
    if (!s->is_kernel() || s->kernel_opts.mode != kernel_mode::persistent) continue;
    const auto& d = *s->dev;
    forced[d.budget().pool()].push_back(s->name);
    budget[d.budget().pool()] = d.budget().budget() - d.budget().persistent_in_use();
  }
  for (const auto& [pool, names] : forced) {
    if (names.size() <= budget[pool]) continue;
    std::string list;
    for (const auto& n : names)
      list.append(list.empty() ? "'" : ", '").append(n).append("'");
    std::string what = "pipeline '" + options.name + "' forces " + std::to_string(names.size());
    what.append(" persistent kernels (").append(list).append(") onto pool '").append(pool).append("', which has ");
    what.append(std::to_string(budget[pool])).append(" free workers; let the runtime choose their modes (parked)");
    throw error(errc::budget_exceeded, what);
  }
}

// Places each kernel stage on its device: the one asked for, or the freest.
void pipeline_impl::place_kernels() {
  const auto& topo = rt.devices();
  std::vector<std::uint32_t> placed(topo.size(), 0);
  for (auto& s : stages) {
    if (!s->is_kernel()) continue;
    std::size_t index = 0;
    if (s->where.device) {
      if (*s->where.device >= topo.size())
        throw error(errc::invalid_pipeline, "stage '" + s->name + "' is placed on device " +
                                                std::to_string(*s->where.device) + " but the runtime has " +
                                                std::to_string(topo.size()) + " devices");
      index = *s->where.device;
    } else {
      // The device with the most free persistent workers, then the fewest kernels of this pipeline.
      auto score = [&](std::size_t i) {
        const auto& b = topo[i].budget();
        const auto free = static_cast<long>(b.budget()) - static_cast<long>(b.persistent_in_use());
        return std::pair<long, long>{free, -static_cast<long>(placed[i])};
      };
      for (std::size_t i = 1; i < topo.size(); ++i)
        if (score(i) > score(index)) index = i;
    }
    ++placed[index];
    s->dev = topo[index];
  }
}

namespace {
// Whether the program (with its embedded includes) defines `name` with RINGPIPE_MAP_KERNEL.
bool declares_map_kernel(const std::string& source, const std::string& name) {
  return resolve_includes(source).find("RINGPIPE_MAP_KERNEL(" + name + ",") != std::string::npos;
}
bool same_options(const kernel_options& a, const kernel_options& b) {
  return a.mode == b.mode && a.local_size == b.local_size && a.idle_budget == b.idle_budget &&
         a.batch_capacity == b.batch_capacity && a.staging_lanes == b.staging_lanes &&
         a.stall_timeout == b.stall_timeout;
}
} // namespace

// Adjacent map kernels of one program on one device, with nothing else reading between them,
// become one kernel (RINGPIPE_FUSE): one resident kernel and no ring instead of two.
void pipeline_impl::fuse() {
  if (!options.fuse_kernels) return;
  for (std::size_t ai = 0; ai < stages.size(); ++ai) {
    auto& a = *stages[ai];
    if (!a.is_kernel() || a.fused_into || !declares_map_kernel(a.spec.source, a.spec.name)) continue;
    const std::string program = a.spec.source;
    while (a.out_edges.size() == 1) {
      auto& e = edges[a.out_edges[0]];
      auto& b = *stages[e.to];
      if (!b.is_kernel() || b.in_edges.size() != 1 || e.options.kind || e.options.capacity != 0) break;
      if (b.dev->index() != a.dev->index() || b.spec.source != program ||
          b.spec.build_options != a.spec.build_options || !declares_map_kernel(program, b.spec.name) ||
          !b.spec.args.empty() || b.spec.state_bytes != 0 || !same_options(a.kernel_opts, b.kernel_opts))
        break;
      a.spec.source += "\nRINGPIPE_FUSE(" + a.spec.name + ", " + b.spec.name + ")\n";
      a.spec.name += "__then__" + b.spec.name;
      a.out = b.out;
      a.fused_with.push_back(b.name);
      e.kind = link_kind::fused;
      a.out_edges = b.out_edges;
      for (const auto x : a.out_edges)
        edges[x].from = ai;
      b.out_edges.clear();
      b.fused_into = ai;
    }
  }
}

// Builds the kernels: a build error or a declared size that does not match the stage's message
// types is refused here, before anything runs.
void pipeline_impl::build_kernels() {
  for (auto& s : stages) {
    if (!s->is_kernel() || s->fused_into) continue;
    try {
      s->kernel = std::make_unique<ring_kernel_base>(rt, *s->dev, s->spec, s->in.size, s->out.size, s->kernel_opts);
    } catch (const ringpipe::error& e) {
      throw error(e.code(), "pipeline '" + options.name + "': stage '" + s->name + "': " + e.what());
    }
  }
}

// Chooses each connection's kind and rings (see pipeline.hpp and the design notes):
//  - a kernel with one input polls its connection's ring directly when the ring is in memory it
//    reaches (its device's SVM), and likewise for its output;
//  - a connection between kernels on devices that share fine-grained SVM is one ring: direct;
//  - otherwise a host mover copies batches between a ring near each end: staged. Kernels with
//    several inputs or outputs get a merging or splitting mover.
void pipeline_impl::realize_links() {
  for (std::size_t ei = 0; ei < edges.size(); ++ei) {
    auto& e = edges[ei];
    if (e.kind == link_kind::fused) continue;
    auto& a = *stages[e.from];
    auto& b = *stages[e.to];
    const std::uint32_t capacity = e.options.capacity != 0 ? e.options.capacity : options.capacity;
    const auto slot = static_cast<std::uint32_t>(a.out.size);
    const std::string ring_name = e.from_port + "->" + e.to_port;
    // A kernel end that polls this connection's ring itself (one connection on that side).
    const std::optional<device> prod = a.is_kernel() && a.out_edges.size() == 1 ? a.dev : std::nullopt;
    const std::optional<device> cons = b.is_kernel() && b.in_edges.size() == 1 ? b.dev : std::nullopt;
    const bool forced_staged = e.options.kind == link_kind::staged;
    const bool one_ring_possible = !prod || !cons || (prod->index() == cons->index()) ||
                                   (prod->shares_context_with(*cons) && shares_memory(*prod) && shares_memory(*cons));
    if (e.options.kind == link_kind::direct &&
        (!one_ring_possible || (prod && !shares_memory(*prod)) || (cons && !shares_memory(*cons)))) {
      throw error(errc::invalid_pipeline, "connection " + a.out_port() + " -> " + b.in_port() +
                                              " cannot be direct: its ends do not share fine-grained SVM (" +
                                              (prod ? prod->label() : std::string("host")) + " -> " +
                                              (cons ? cons->label() : std::string("host")) + ")");
    }
    if (e.options.kind == link_kind::copy)
      throw error(errc::invalid_pipeline, "connection " + a.out_port() + " -> " + b.in_port() +
                                              ": device-to-device copy links are not built yet; use staged");
    if (one_ring_possible && !(forced_staged && prod && cons)) {
      // One ring, near whichever kernel end polls it (the consumer's if both).
      e.consumer_ring = make_ring(cons ? cons : prod, capacity, slot, ring_name);
      e.producer_ring = e.consumer_ring;
      const bool copies =
          (prod && !reachable(*e.consumer_ring, *prod)) || (cons && !reachable(*e.consumer_ring, *cons));
      e.kind = copies || forced_staged ? link_kind::staged : link_kind::direct;
      // A forced staged link with a host end still goes through a mover, so that it is measured.
      if (forced_staged) {
        e.producer_ring = make_ring(prod, capacity, slot, ring_name + ".staging");
        e.mover =
            std::make_shared<host_actor>(rt.io(), ring_name + " (staged)", stage_kind::mover, options.staging_batch);
      }
    } else {
      e.producer_ring = make_ring(prod, capacity, slot, ring_name + ".out");
      e.consumer_ring = make_ring(cons, capacity, slot, ring_name + ".in");
      e.kind = link_kind::staged;
      e.mover =
          std::make_shared<host_actor>(rt.io(), ring_name + " (staged)", stage_kind::mover, options.staging_batch);
    }
    if (e.mover) {
      e.mover->add_input(e.producer_ring);
      e.mover->add_output(e.consumer_ring, cons ? b.kernel.get() : nullptr);
      auto* input = e.mover->inputs.back().get();
      e.delivered = [input] { return input->popped.load(std::memory_order_relaxed); };
      actors.push_back(e.mover);
    }
  }

  // Each stage's side of its connections.
  for (auto& sp : stages) {
    auto& s = *sp;
    if (s.fused_into) continue;
    if (s.is_kernel()) {
      const auto& d = *s.dev;
      if (!s.in.none()) {
        if (s.in_edges.size() == 1) {
          s.kernel_in = edges[s.in_edges[0]].consumer_ring;
        } else {
          s.kernel_in = make_ring(d, options.capacity, static_cast<std::uint32_t>(s.in.size), s.in_port() + ".merged");
          auto merge =
              std::make_shared<host_actor>(rt.io(), s.in_port() + " (merge)", stage_kind::mover, options.staging_batch);
          for (const auto ei : s.in_edges)
            merge->add_input(edges[ei].consumer_ring);
          merge->add_output(s.kernel_in, s.kernel.get());
          actors.push_back(merge);
        }
      }
      if (!s.out.none()) {
        if (s.out_edges.size() == 1) {
          s.kernel_out = edges[s.out_edges[0]].producer_ring;
        } else {
          s.kernel_out =
              make_ring(d, options.capacity, static_cast<std::uint32_t>(s.out.size), s.out_port() + ".split");
          auto split = std::make_shared<host_actor>(rt.io(), s.out_port() + " (split)", stage_kind::mover,
                                                    options.staging_batch);
          split->policy = s.policy;
          split->add_input(s.kernel_out);
          for (const auto ei : s.out_edges)
            split->add_output(edges[ei].producer_ring, nullptr);
          actors.push_back(split);
        }
      }
      continue;
    }
    if (s.kind == stage_kind::inlet) {
      s.port = edges[s.out_edges[0]].producer_ring;
      continue;
    }
    if (s.kind == stage_kind::outlet) {
      s.port = edges[s.in_edges[0]].consumer_ring;
      continue;
    }
    auto actor = std::make_shared<host_actor>(rt.io(), s.name, s.kind, options.staging_batch);
    actor->policy = s.policy;
    actor->generate = s.generate;
    actor->transform = s.transform;
    actor->consume = s.consume;
    for (const auto ei : s.in_edges)
      actor->add_input(edges[ei].consumer_ring);
    for (const auto ei : s.out_edges) {
      const auto& e = edges[ei];
      auto& b = *stages[e.to];
      const bool feeds_kernel = !e.mover && b.is_kernel() && b.in_edges.size() == 1;
      actor->add_output(e.producer_ring, feeds_kernel ? b.kernel.get() : nullptr);
    }
    s.actor = actor;
    actors.push_back(actor);
  }

  // What each connection's consumer side has taken.
  for (auto& e : edges) {
    if (e.delivered || e.kind == link_kind::fused) continue;
    auto& b = *stages[e.to];
    if (b.actor) {
      const auto k = static_cast<std::size_t>(
          std::find(b.in_edges.begin(), b.in_edges.end(), static_cast<std::size_t>(&e - edges.data())) -
          b.in_edges.begin());
      auto* input = b.actor->inputs[k].get();
      e.delivered = [input] { return input->popped.load(std::memory_order_relaxed); };
    } else if (b.is_kernel() && b.in_edges.size() == 1) {
      auto* k = b.kernel.get();
      e.delivered = [k] { return k->stats().msgs_in; };
    } else {
      auto r = e.consumer_ring;
      e.delivered = [r] { return r->popped(); };
    }
  }
}

void pipeline_impl::launch() {
  for (auto& a : actors)
    a->on_failure = [this, name = a->name](const std::exception_ptr& e) { record_failure(name, e); };
  try {
    for (auto& s : stages)
      if (s->kernel) s->kernel->start_buffers(s->kernel_in, s->kernel_out);
  } catch (...) {
    halt();
    throw;
  }
  start_time = std::chrono::steady_clock::now();
  for (auto& a : actors)
    a->start();
}

std::string pipeline_impl::stage_label(const stage_def& s) const {
  std::string l = std::string(to_string(s.kind)) + " '" + s.name + "'";
  if (s.kernel) l += " on " + s.dev->label() + " (" + std::string(to_string(s.kernel->mode())) + ")";
  for (const auto& f : s.fused_with)
    l += ", fused with '" + f + "'";
  if (s.fused_into) l += ": runs fused in the kernel of '" + stages[*s.fused_into]->name + "'";
  return l;
}

} // namespace detail

pipeline::pipeline(runtime& rt, pipeline_options options)
    : impl_(std::make_unique<detail::pipeline_impl>(rt, std::move(options))) {}

pipeline::~pipeline() {
  if (!impl_->started) return;
  impl_->halt();
  impl_->join();
  // Kernels stop in their destructors (at once, waiting for their launches to return).
}

runtime& pipeline::rt() noexcept { return impl_->rt; }

std::size_t pipeline::add_stage(std::string name, stage_kind kind, message_type in, message_type out) {
  if (impl_->started) throw error(errc::invalid_pipeline, "stage '" + name + "' added after start()");
  if (name.empty() || name.find('.') != std::string::npos)
    throw error(errc::invalid_argument, "stage name '" + name + "' must be non-empty and without '.'");
  for (const auto& s : impl_->stages)
    if (s->name == name)
      throw error(errc::invalid_pipeline, "pipeline '" + impl_->options.name + "' already has a stage '" + name + "'");
  auto s = std::make_unique<detail::stage_def>();
  s->name = std::move(name);
  s->kind = kind;
  s->in = std::move(in);
  s->out = std::move(out);
  impl_->stages.push_back(std::move(s));
  return impl_->stages.size() - 1;
}

detail::stage_def& pipeline::def(std::size_t id) { return *impl_->stages.at(id); }
void pipeline::set_generate(std::size_t id, byte_generate fn) { def(id).generate = std::move(fn); }
void pipeline::set_transform(std::size_t id, byte_transform fn) { def(id).transform = std::move(fn); }
void pipeline::set_consume(std::size_t id, byte_consume fn) { def(id).consume = std::move(fn); }
void pipeline::set_kernel(std::size_t id, kernel_spec spec, placement where, kernel_options options) {
  auto& s = def(id);
  s.spec = std::move(spec);
  s.where = where;
  s.kernel_opts = options;
}

void pipeline::connect_ids(std::size_t from, std::size_t to, link_options options) {
  if (impl_->started) throw error(errc::invalid_pipeline, "connect() after start()");
  auto& a = def(from);
  auto& b = def(to);
  for (const auto ei : a.out_edges)
    if (impl_->edges[ei].to == to)
      throw error(errc::invalid_pipeline, a.out_port() + " is already connected to " + b.in_port());
  detail::edge_def e;
  e.from = from;
  e.to = to;
  e.from_port = a.out_port();
  e.to_port = b.in_port();
  e.options = options;
  impl_->edges.push_back(std::move(e));
  a.out_edges.push_back(impl_->edges.size() - 1);
  b.in_edges.push_back(impl_->edges.size() - 1);
}

void pipeline::connect(const std::string& from, const std::string& to, link_options options) {
  auto stage_of = [&](const std::string& port, const char* suffix) {
    const auto dot = port.find('.');
    if (dot != std::string::npos && port.substr(dot) != suffix)
      throw error(errc::invalid_pipeline, "'" + port + "' is not a port: write '" + port.substr(0, dot) + suffix + "'");
    return impl_->find(port.substr(0, dot));
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

void pipeline::set_fan_out(const std::string& stage, fan_out policy) { def(impl_->find(stage)).policy = policy; }

void pipeline::start() {
  auto& p = *impl_;
  if (p.started) throw error(errc::invalid_pipeline, "pipeline '" + p.options.name + "' was already started");
  p.validate();
  p.place_kernels();
  p.fuse();
  p.build_kernels();
  p.check_budget();
  p.realize_links();
  p.started = true;
  p.launch();
}

std::exception_ptr pipeline::failure() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->first_failure;
}

void pipeline::wait(std::chrono::nanoseconds timeout) {
  auto& p = *impl_;
  if (!p.started) throw error(errc::invalid_pipeline, "pipeline '" + p.options.name + "' was never started");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto& s : p.stages)
      if (s->kernel)
        if (auto f = s->kernel->failure()) p.record_failure(s->name, f);
    if (auto f = failure()) {
      p.halt();
      p.join();
      std::rethrow_exception(f);
    }
    const bool done = std::all_of(p.stages.begin(), p.stages.end(), [&](const auto& st) { return p.finished(*st); });
    if (done) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string pending;
      for (const auto& st : p.stages)
        if (!p.finished(*st))
          pending += (pending.empty() ? "" : ", ") + p.stage_label(*st) + " (" + p.why_running(*st) + ")";
      throw error(errc::timeout,
                  "pipeline '" + p.options.name + "' did not finish within " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                      " ms; still running: " + pending);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

stop_report pipeline::stop() noexcept {
  stop_report report;
  if (!impl_->started) return report;
  impl_->halt();
  impl_->join();
  // Every ring once: a direct link's ring is both an edge's and a kernel's.
  std::vector<const ring_buffer*> seen;
  auto count = [&](const std::shared_ptr<ring_buffer>& r) {
    if (!r || std::find(seen.begin(), seen.end(), r.get()) != seen.end()) return;
    seen.push_back(r.get());
    if (const auto n = r->size(); n > 0) {
      report.undelivered += n;
      report.rings.push_back({r->name(), n});
    }
  };
  for (const auto& e : impl_->edges) {
    count(e.producer_ring);
    count(e.consumer_ring);
  }
  for (const auto& st : impl_->stages) {
    count(st->kernel_in);
    count(st->kernel_out);
    count(st->port);
  }
  return report;
}

std::shared_ptr<ring_buffer> pipeline::port_ring(const std::string& name, const message_type& type, bool inlet) {
  auto& s = def(impl_->find(name));
  const auto want = inlet ? stage_kind::inlet : stage_kind::outlet;
  if (s.kind != want)
    throw error(errc::invalid_argument, "stage '" + name + "' is a " + std::string(to_string(s.kind)) + ", not an " +
                                            std::string(to_string(want)));
  const auto& t = inlet ? s.out : s.in;
  if (t.type != type.type)
    throw error(errc::message_size, std::string(inlet ? "inlet" : "outlet") + " '" + name + "' carries " +
                                        detail::type_text(t) + ", not " + detail::type_text(type));
  if (!s.port) throw error(errc::invalid_pipeline, "inlet and outlet rings exist after start()");
  return s.port;
}

pipeline_metrics pipeline::metrics() const {
  const auto& p = *impl_;
  pipeline_metrics m;
  if (p.started) m.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start_time).count();
  auto queue = [](stage_metrics& sm, const std::shared_ptr<ring_buffer>& r) {
    if (!r) return;
    sm.queue_fill += r->size();
    sm.queue_capacity += r->capacity();
    sm.queue_high_water = std::max(sm.queue_high_water, r->high_water());
  };
  auto actor_metrics = [&](stage_metrics& sm, const detail::host_actor& a) {
    sm.msgs_in = a.msgs_in.load();
    sm.msgs_out = a.msgs_out.load();
    sm.busy_s = static_cast<double>(a.busy_ns.load()) * 1e-9;
    sm.state = a.failed ? "failed" : a.finished ? "finished" : a.exited ? "stopped" : p.started ? "running" : "idle";
    for (const auto& in : a.inputs)
      queue(sm, in->ring);
  };
  for (const auto& s : p.stages) {
    stage_metrics sm;
    sm.name = s->name;
    sm.kind = s->kind;
    sm.device = s->dev ? s->dev->label() : "host";
    sm.mode = "actor";
    if (s->fused_into) {
      const auto& head = *p.stages[*s->fused_into];
      sm.mode = "fused";
      sm.state = "fused into '" + head.name + "'";
    } else if (s->kernel) {
      const auto st = s->kernel->stats();
      sm.mode = std::string(to_string(s->kernel->mode()));
      sm.state = std::string(to_string(s->kernel->state()));
      sm.msgs_in = st.msgs_in;
      sm.msgs_out = st.msgs_out;
      sm.launches = st.launches;
      queue(sm, s->kernel_in);
    } else if (s->actor) {
      actor_metrics(sm, *s->actor);
    } else if (s->port) {
      sm.mode = "application";
      sm.msgs_in = sm.msgs_out = s->kind == stage_kind::inlet ? s->port->pushed() : s->port->popped();
      sm.state = s->kind == stage_kind::inlet ? (s->port->closed() ? "closed" : "open")
                                              : (s->port->drained() ? "finished" : "open");
      if (s->kind == stage_kind::outlet) queue(sm, s->port);
    }
    m.stages.push_back(std::move(sm));
  }
  for (const auto& a : p.actors) {
    if (a->kind != stage_kind::mover) continue;
    stage_metrics sm;
    sm.name = a->name;
    sm.kind = stage_kind::mover;
    sm.device = "host";
    sm.mode = "actor";
    actor_metrics(sm, *a);
    m.stages.push_back(std::move(sm));
    m.copies += a->batches.load();
  }
  // Kernels on devices without shared memory copy every batch in and out of device buffers.
  for (const auto& s : p.stages)
    if (s->kernel && !detail::shares_memory(*s->dev)) m.copies += s->kernel->stats().launches;
  for (const auto& e : p.edges) {
    link_metrics lm;
    lm.from = e.from_port;
    lm.to = e.to_port;
    lm.kind = e.kind;
    lm.forced = e.options.kind.has_value();
    if (e.delivered) lm.messages = e.delivered();
    lm.bytes = lm.messages * p.stages[e.from]->out.size;
    if (e.mover) lm.batches = e.mover->batches.load();
    if (e.consumer_ring) {
      lm.capacity = e.consumer_ring->capacity();
      lm.high_water = e.consumer_ring->high_water();
      if (e.producer_ring != e.consumer_ring) {
        lm.capacity += e.producer_ring->capacity();
        lm.high_water = std::max(lm.high_water, e.producer_ring->high_water());
      }
    }
    (e.kind == link_kind::direct ? m.direct_links : e.kind == link_kind::fused ? m.fused_links : m.staged_links) += 1;
    m.links.push_back(std::move(lm));
  }
  return m;
}

std::string pipeline::plan() const {
  const auto& p = *impl_;
  std::string s;
  for (const auto& st : p.stages)
    s += p.stage_label(*st) + "\n";
  for (const auto& e : p.edges) {
    s += e.from_port + " -> " + e.to_port + ": " + std::string(to_string(e.kind));
    if (e.consumer_ring) {
      s += " (" + std::to_string(e.consumer_ring->capacity()) + " slots in " +
           (e.consumer_ring->memory() == ring_memory::svm ? "SVM" : "host memory");
      if (e.mover)
        s += ", copied by a host mover from a ring in " +
             std::string(e.producer_ring->memory() == ring_memory::svm ? "SVM" : "host memory");
      s += ")";
    }
    s += "\n";
  }
  return s;
}

} // namespace ringpipe
