// Setting a barrier up: its participants checked (ring kernels among them must share fine-grained
// SVM with atomics in one context, and fit their devices' persistent budgets together: a kernel
// waiting for one that can never start would hang), its words allocated, each kernel's seat bound
// to its argument and its exit watched; and the watcher, the host's part for barriers with ring
// kernels: it fails a phase that times out or that a departed kernel can no longer reach, and
// completes phases a kernel arrived at last when a completion function must run.

#include "barrier_state.hpp"

#include "../core/thread_name.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/device.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/runtime.hpp>

#include <map>
#include <new>
#include <unordered_set>

namespace ringpipe {
namespace detail {

barrier_words::barrier_words(std::size_t participants, cl_context svm_context, const std::string& barrier_name) {
  const std::size_t bytes = sizeof(barrier_header) + participants * sizeof(barrier_seat);
  if (svm_context != nullptr) {
    memory_ = clSVMAlloc(svm_context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS, bytes, 64);
    if (memory_ == nullptr)
      throw error(errc::out_of_memory, "barrier '" + barrier_name + "': clSVMAlloc of " + std::to_string(bytes) +
                                           " bytes of fine-grained SVM with atomics failed");
    context_ = svm_context;
    clRetainContext(context_);
  } else {
    memory_ = ::operator new (bytes, std::align_val_t{64});
  }
  new (memory_) barrier_header();
  seats_ = reinterpret_cast<barrier_seat*>(static_cast<char*>(memory_) + sizeof(barrier_header));
  for (std::size_t i = 0; i < participants; ++i)
    new (seats_ + i) barrier_seat();
}

barrier_words::~barrier_words() {
  if (context_ != nullptr) {
    clSVMFree(context_, memory_);
    clReleaseContext(context_);
  } else {
    ::operator delete (memory_, std::align_val_t{64});
  }
}

namespace {

// Whether a kernel waits on its device (shared memory) rather than arriving through the host.
bool waits_on_device(const ring_kernel_base& k, bool through_host) {
  const auto& info = k.on_device().info();
  return !through_host && info.svm.fine_buffer && info.svm.atomics && info.c11_atomics;
}

// Refuses a kernel the barrier cannot hold: running, or waiting on a device in another context
// than the kernels before it (`shared`, `first`: the first such kernel's context and name).
void check_kernel(const ring_kernel_base& k, bool through_host, const std::string& label, cl_context& shared,
                  std::string& first) {
  const auto& dev = k.on_device();
  const std::string who = label + ": kernel '" + k.name() + "' on device '" + dev.label() + "'";
  if (k.started())
    throw error(errc::invalid_argument, who + " is already running: create the barrier before starting it");
  if (!waits_on_device(k, through_host)) return; // it arrives through the host, between launches
  if (shared != nullptr && shared != dev.context()())
    throw error(errc::unsupported_mode, who + " does not share memory with kernel '" + first +
                                            "' (another platform): the kernels that wait on their devices share one "
                                            "context");
  if (shared == nullptr) {
    shared = dev.context()();
    first = k.name();
  }
}

// Refuses kernels the barrier cannot hold; returns the context that those waiting on their devices
// share (null: none).
cl_context check_kernels(const std::vector<barrier_participant>& participants, bool through_host,
                         const std::string& label) {
  cl_context shared = nullptr;
  std::string first;
  std::map<occupancy*, std::vector<std::string>> per_pool;
  for (const auto& p : participants) {
    if (p.kernel() == nullptr) continue;
    check_kernel(*p.kernel(), through_host, label, shared, first);
    if (waits_on_device(*p.kernel(), through_host)) per_pool[&p.kernel()->on_device().budget()].push_back(p.name());
  }
  for (const auto& [pool, kernels] : per_pool) {
    if (kernels.size() <= pool->budget()) continue;
    std::string text = label + ": its kernels ";
    for (std::size_t i = 0; i < kernels.size(); ++i)
      text.append(i == 0 ? "'" : ", '").append(kernels[i]).append("'");
    throw error(errc::budget_exceeded, text + " must all be resident at once to meet, but worker pool '" +
                                           pool->pool() + "' holds at most " + std::to_string(pool->budget()) +
                                           " persistent kernel(s): the barrier could never complete a phase");
  }
  return shared;
}

// Whether the participants that poll on this host's cores (host participants, and kernels
// waiting on CPU devices, whose workers are this host's threads) fit in its cores. Says so where
// they do not and kernels are among them: every phase then waits for the scheduler to give a
// spinning kernel's core to a participant that has not arrived (about 1 ms a phase where two
// kernels share one core, against under 1 us on cores of their own).
bool spinners_fit(const std::vector<barrier_participant>& participants, bool through_host, const std::string& label) {
  std::size_t hosts = 0;
  std::vector<const ring_kernel_base*> spinning;
  const ring_kernel_base* any_kernel = nullptr;
  for (const auto& p : participants) {
    if (p.kernel() == nullptr) {
      ++hosts;
      continue;
    }
    any_kernel = p.kernel();
    if (waits_on_device(*p.kernel(), through_host) && p.kernel()->on_device().info().type == device_type::cpu)
      spinning.push_back(p.kernel());
  }
  const std::size_t cores =
      any_kernel != nullptr ? any_kernel->owner().host_cores() : static_cast<std::size_t>(usable_cpus());
  if (hosts + spinning.size() <= cores) return true;
  if (spinning.empty()) return false;
  runtime& rt = spinning.front()->owner();
  if (hosts == 0) {
    rt.notice(label + ": " + std::to_string(spinning.size()) + " kernel(s) waiting on CPU devices on " +
              std::to_string(rt.host_cores()) +
              " core(s): they cannot all run at once, so a kernel that arrived spins until the scheduler gives its "
              "core to one that has not, and each phase waits for a time slice (milliseconds); kernels written "
              "with rp_barrier_next can arrive through the host instead (barrier_options::kernels_through_host)");
    return false;
  }
  rt.notice(label + ": " + std::to_string(spinning.size()) + " kernel(s) waiting on CPU devices and " +
            std::to_string(hosts) + " host participant(s) on " + std::to_string(rt.host_cores()) +
            " core(s): the kernels spin on the cores the host participants need, and each phase waits for a time "
            "slice (milliseconds); kernels written with rp_barrier_next can arrive through the host instead "
            "(barrier_options::kernels_through_host)");
  return false;
}

} // namespace
} // namespace detail

// The gate of a kernel that arrives through the host: each launch is one phase; it reports its
// arrival in its control block (rp_barrier_relay), and its next launch waits for the release.
class barrier::state::relay_gate final : public launch_gate {
public:
  relay_gate(const std::shared_ptr<state>& s, std::size_t who) : state_(s), who_(who) {}

  verdict may_launch() override {
    const auto s = state_.lock();
    if (!s || s->failed()) return verdict::failed;
    const std::uint32_t arrival = s->seat(who_).arrival.load(std::memory_order_acquire);
    if (arrival == s->header().phase.load(std::memory_order_acquire) + 1) return verdict::hold;
    if (arrival != counted_) { // released from the phase it arrived at
      counted_ = arrival;
      s->seat(who_).waits.fetch_add(1, std::memory_order_relaxed);
    }
    return verdict::launch;
  }
  void arrived(std::uint32_t count) override {
    const auto s = state_.lock();
    if (!s) return;
    if (count != 1) {
      s->fail(error(errc::stage_failed, s->label() + ": participant '" + s->members[who_].name + "' arrived " +
                                            std::to_string(count) + " times in one launch (once per launch)"));
      return;
    }
    try {
      (void)s->arrive_seat(who_);
    } catch (const std::exception&) {
      // The barrier failed: its error reaches this kernel through may_launch.
    }
  }
  std::string failure() const override {
    const auto s = state_.lock();
    return s ? s->failure_error().what() : "the barrier was destroyed";
  }
  void attach(std::function<void()> wake) override {
    if (const auto s = state_.lock()) {
      std::lock_guard lock(s->mutex);
      counted_ = s->options.first_phase;
      s->members[who_].wake = std::move(wake);
    }
  }

private:
  std::weak_ptr<state> state_;
  std::size_t who_;
  std::uint32_t counted_ = 0; // the arrival whose release was counted as a wait
};

barrier_participant::barrier_participant(ring_kernel_base& kernel, unsigned seat_arg, std::string name)
    : name_(name.empty() ? kernel.name() + "@" + std::to_string(kernel.on_device().index()) : std::move(name)),
      kernel_(&kernel), seat_arg_(seat_arg) {}

barrier::barrier(std::vector<barrier_participant> participants, barrier_options options)
    : s_(std::make_shared<state>()) {
  auto& s = *s_;
  s.options = std::move(options);
  if (participants.empty()) throw error(errc::invalid_argument, s.label() + " needs at least one participant");
  std::unordered_set<std::string> seen;
  for (const auto& p : participants)
    if (!seen.insert(p.name()).second)
      throw error(errc::invalid_argument, s.label() + " names participant '" + p.name() + "' twice");
  const bool through_host = s.options.kernels_through_host;
  const cl_context context = detail::check_kernels(participants, through_host, s.label());
  s.waiters_spin = detail::spinners_fit(participants, through_host, s.label());
  bool relayed = false;
  for (const auto& p : participants) {
    if (!p.kernel()) continue;
    if (detail::waits_on_device(*p.kernel(), through_host))
      p.kernel()->require_resident(s.label() + " (its kernels wait on the device)");
    else
      relayed = true;
  }
  s.words = std::make_shared<detail::barrier_words>(participants.size(), context, s.options.name);
  auto& h = s.header();
  h.size.store(static_cast<std::uint32_t>(participants.size()), std::memory_order_relaxed);
  // Kernels that arrive through the host are relaunched by the host when it releases a phase.
  h.host_completes.store(s.options.on_phase || relayed ? 1 : 0, std::memory_order_relaxed);
  s.has_relayed = relayed;
  s.members.resize(participants.size());
  for (std::size_t i = 0; i < participants.size(); ++i) {
    auto& seat = s.seat(i);
    seat.index.store(static_cast<std::uint32_t>(i), std::memory_order_relaxed);
    // Arrived at the phase before the first: not at the first.
    seat.arrival.store(s.options.first_phase, std::memory_order_relaxed);
    auto& m = s.members[i];
    m.name = participants[i].name();
    m.kernel = participants[i].kernel();
    if (m.kernel) m.device = "device '" + m.kernel->on_device().label() + "'";
    s.has_hosts = s.has_hosts || m.kernel == nullptr;
  }
  h.phase.store(s.options.first_phase, std::memory_order_release);
  for (std::size_t i = 0; i < participants.size(); ++i) {
    auto* k = participants[i].kernel();
    if (k == nullptr) continue;
    s.has_kernels = true;
    if (detail::waits_on_device(*k, through_host)) {
      k->set_arg_svm(participants[i].seat_arg(), &s.seat(i));
    } else {
      // A null seat: rp_barrier_next arrives through the host (a kernel written for the relay
      // alone may use that argument for something else, set already).
      if (k->argument_unset(participants[i].seat_arg())) k->set_arg(participants[i].seat_arg(), cl_mem{nullptr});
      k->set_launch_gate(std::make_shared<state::relay_gate>(s_, i));
    }
    // The kernel keeps the words alive while it may still read them; the barrier's state may be
    // gone by the time it exits.
    k->on_exit([words = s.words, weak = std::weak_ptr<state>(s_), i](kernel_state, const std::exception_ptr& failure) {
      (void)words;
      if (auto st = weak.lock()) st->departed(i, failure);
    });
  }
  if (s.has_kernels)
    s.watcher = std::thread([&s] {
      detail::name_this_thread("ringpipe-phases");
      s.watch();
    });
}

barrier::~barrier() {
  // Whoever still waits (a kernel, a thread in wait()) is released with this error.
  fail_as("was destroyed", "participants still waiting are released");
  if (!s_->watcher.joinable()) return;
  {
    std::lock_guard lock(s_->mutex);
    s_->stopping = true;
  }
  s_->wake_watcher.notify_all();
  s_->watcher.join();
}

void barrier::state::departed(std::size_t who, const std::exception_ptr& failure_of) {
  auto& m = members.at(who);
  std::lock_guard lock(mutex);
  if (m.departed) return;
  m.departed = true;
  if (!failure_of) {
    wake_watcher.notify_all(); // a phase in progress it did not arrive at fails now
    return;
  }
  std::string why = "failed";
  try {
    std::rethrow_exception(failure_of);
  } catch (const std::exception& e) {
    why = std::string("failed: ") + e.what();
  }
  fail_locked(error(errc::stage_failed, label() + " phase " +
                                            std::to_string(header().phase.load(std::memory_order_acquire)) +
                                            ": participant '" + m.name + "' (a kernel on " + m.device + ") " + why));
}

void barrier::state::watch() {
  // Completions a kernel leaves to the host are looked for in steps from 10 us to 1 ms, back to
  // 10 us whenever phases move; without a completion function, timeouts and departures only
  // need a look every millisecond (a departure wakes it at once).
  const bool completes = header().host_completes.load(std::memory_order_relaxed) != 0;
  const auto ceiling = std::chrono::microseconds(1000);
  auto step = completes ? std::chrono::microseconds(10) : ceiling;
  std::uint32_t seen = header().phase.load(std::memory_order_acquire);
  for (;;) {
    {
      std::unique_lock lock(mutex);
      if (stopping) return;
      wake_watcher.wait_for(lock, step);
      if (stopping) return;
    }
    if (failed()) {
      step = ceiling;
      continue;
    }
    const std::uint32_t p = header().phase.load(std::memory_order_acquire);
    (void)look_after(p);
    const bool moved = p != seen || header().arrived.load(std::memory_order_relaxed) != 0;
    seen = p;
    if (completes) step = moved ? std::chrono::microseconds(10) : std::min(step * 2, ceiling);
  }
}

} // namespace ringpipe
