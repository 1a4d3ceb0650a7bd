// Kernels whose launches the host publishes (batched) wake their neighbours on each publish: the
// stage that consumes their output and the one that produces their input would otherwise find out
// on their next poll, up to a millisecond later, with the ring between them full or empty. So do
// ports that a remote link fills or drains (port_waker). A host neighbour in a paced sleep
// (throughput) is left to it while the ring between has slack, and woken out of it where the
// publish left the kernel's input ring a quarter full or less, or its output ring a quarter free
// or less (host_stage::kernel_published): at its pace the kernel would run dry or fill up first (a
// batched kernel that takes its whole ring at each launch waited up to a millisecond for a farm's
// dealer to refill it).

#include "runner.hpp"

namespace ringpipe::detail {

std::function<void()> runner::waker_across(std::size_t ei, std::size_t other) const {
  if (auto mover = links_[ei].mover) return [mover] { mover->wake(); };
  if (auto actor = stages_[other].actor) return [actor] { actor->wake(); };
  if (auto* k = stages_[other].kernel.get()) return kernel_waker(k);
  return nullptr;
}

std::function<void()> runner::port_waker(std::size_t stage) const {
  const auto& s = g_.stages[stage];
  if (s.kind == stage_kind::inlet) return waker_across(s.out_edges[0], g_.edges[s.out_edges[0]].to);
  if (s.kind == stage_kind::outlet) return waker_across(s.in_edges[0], g_.edges[s.in_edges[0]].from);
  return nullptr;
}

std::function<void()> runner::publish_waker(std::size_t ei, std::size_t other, bool feeds_kernel) const {
  const auto& l = links_[ei];
  std::shared_ptr<host_stage> host = l.mover ? l.mover : stages_[other].actor;
  const auto ring = feeds_kernel ? l.consumer_ring : l.producer_ring; // the ring at the kernel
  if (!host || !ring) return waker_across(ei, other);
  return [host, ring, feeds_kernel] { host->kernel_published(*ring, feeds_kernel); };
}

void runner::wire_publish_wakes() {
  // Inlets and outlets driven by the application get no wake: it polls them itself.
  for (std::size_t i = 0; i < g_.stages.size(); ++i) {
    auto* k = stages_[i].kernel.get();
    if (k == nullptr || plan_.stages[i].fused_into) continue;
    std::vector<std::function<void()>> wakes;
    const auto& s = g_.stages[i];
    // Merging and splitting movers poll their rings; single connections get a wake.
    if (s.in_edges.size() == 1) wakes.push_back(publish_waker(s.in_edges[0], g_.edges[s.in_edges[0]].from, true));
    if (plan_.stages[i].out_edges.size() == 1)
      wakes.push_back(publish_waker(plan_.stages[i].out_edges[0], g_.edges[plan_.stages[i].out_edges[0]].to, false));
    std::erase(wakes, nullptr);
    if (!wakes.empty())
      k->on_publish([wakes = std::move(wakes)] {
        for (const auto& w : wakes)
          w();
      });
  }
}

} // namespace ringpipe::detail
