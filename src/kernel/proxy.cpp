#include "proxy.hpp"

#include <boost/asio/dispatch.hpp>

#include <cstdio>
#include <future>
#include <mutex>
#include <vector>

namespace ringpipe::detail {
namespace {
// Keeps an object alive for good: what a launch that never returns still uses. It stays reachable
// (so leak checkers do not report it) and is never destroyed, not even at exit.
template <class T> void leak(T&& object) {
  static std::mutex mutex;
  static auto* const kept = new std::vector<std::shared_ptr<void>>(); // never deleted, on purpose
  std::lock_guard lock(mutex);
  kept->push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(object)));
}
} // namespace

kernel_proxy::kernel_proxy(runtime& rt, const device& d, kernel_spec s, std::size_t in_b, std::size_t out_b,
                           kernel_options o)
    : rt_(rt), dev_(d), spec_(std::move(s)), options_(o), in_bytes_(in_b), out_bytes_(out_b),
      executor_(std::make_shared<strand_executor>(rt.io())) {
  image_.emplace(dev_, spec_, in_bytes_, out_bytes_, options_);
  local_size_ = image_->local_size();
  poller_.emplace(executor_, kernel_proxy_timing, [this] { return step(); });
}

void kernel_proxy::check_ring(const std::shared_ptr<ring_buffer>& r, std::size_t bytes, const char* side) const {
  if (!r && bytes != 0) {
    throw error(errc::invalid_argument, "kernel '" + spec_.name + "' needs an " + side + " ring of " +
                                            std::to_string(bytes) + "-byte messages");
  }
  if (r && r->slot_size() != bytes) {
    throw error(errc::message_size, "kernel '" + spec_.name + "' " + side + " ring '" + r->name() + "' has " +
                                        std::to_string(r->slot_size()) +
                                        "-byte slots but the kernel was declared for " + describe_size(bytes));
  }
}

// A ring for a side the kernel does not have, in the kind of memory its driver uses.
std::shared_ptr<ring_buffer> kernel_proxy::absent_ring(bool shared, const char* suffix) const {
  const ring_options named{spec_.name + suffix};
  return shared ? std::make_shared<ring_buffer>(dev_, 1, 4, named) : std::make_shared<ring_buffer>(1, 4, named);
}

void kernel_proxy::start(std::shared_ptr<ring_buffer> input, std::shared_ptr<ring_buffer> output) {
  if (started_) throw error(errc::invalid_argument, "kernel '" + spec_.name + "' was already started");
  image_->check_args_set();
  check_ring(input, in_bytes_, "input");
  check_ring(output, out_bytes_, "output");
  has_input_ = input != nullptr;
  has_output_ = output != nullptr;
  const auto& info = dev_.info();
  mode_facts facts;
  facts.device_shares_memory = info.svm.fine_buffer && info.svm.atomics;
  facts.rings_in_device_svm = true;
  for (const auto& r : {input, output})
    if (r && (r->memory() != ring_memory::svm || r->svm_context() != dev_.context()()))
      facts.rings_in_device_svm = false;
  facts.gated = gate_ != nullptr;
  facts.supports_persistent = info.supports(kernel_mode::persistent);
  facts.supports_parked = info.supports(kernel_mode::parked);
  facts.persistent_available = !options_.mode && !prefer_parked_ && dev_.budget().persistent_available();
  facts.forced = options_.mode;
  const auto choice = choose_mode(facts);
  mode_ = choice.mode;
  if (choice.refusal == mode_refusal::device_cannot) {
    throw error(errc::unsupported_mode,
                "kernel '" + spec_.name + "' cannot run " + std::string(to_string(mode_)) + " on device '" +
                    dev_.name() +
                    "': that needs fine-grained buffer SVM with SVM atomics and acquire/release "
                    "atomics (device has fine_buffer=" +
                    (info.svm.fine_buffer ? "yes" : "no") + ", svm atomics=" + (info.svm.atomics ? "yes" : "no") +
                    ", c11 atomics=" + (info.c11_atomics ? "yes" : "no") + "); batched mode runs everywhere");
  }
  if (choice.refusal == mode_refusal::rings_not_shared) {
    throw error(errc::unsupported_mode, "kernel '" + spec_.name + "' cannot run " + std::string(to_string(mode_)) +
                                            ": its rings are not in this device's SVM (create them with the device)");
  }
  const bool shared = choice.transport == kernel_transport::shared_memory;
  // Host threads that feed it need the core its idle spin would hold (residency.cpp).
  if (leave_when_idle_ && mode_ == kernel_mode::parked)
    options_.idle_budget = std::min(options_.idle_budget, short_idle_budget);
  if (!input) {
    input = absent_ring(shared, ".no-input");
    input->close();
  }
  if (!output) output = absent_ring(shared, ".no-output");
  in_ = std::move(input);
  out_ = std::move(output);
  helped_ = has_output_ && mode_ == kernel_mode::batched;
  driver_ = make_driver(choice.transport, {dev_, *image_, options_, mode_, *in_, *out_, has_input_, has_output_,
                                           counters_, *this, gate_.get()});
  // A kernel that could never get a worker is refused here, in the caller's thread.
  if (dev_.info().persistent_budget > 0) first_slot_ = dev_.budget().try_acquire(mode_, spec_.name);
  started_ = true;
  poller_->set_ceiling(driver_->idle_ceiling());
  poller_->start(weak_from_this());
  // Last: a producer may call it at once (a request the ring's last consumer left pending), and
  // wake() reads started_; a start that threw leaves the ring without it.
  if (has_input_) {
    in_->set_push_wake([weak = weak_from_this()] {
      if (auto p = weak.lock()) p->input_pushed();
    });
  }
  if (has_output_) {
    out_->set_pop_wake([weak = weak_from_this()] {
      if (auto p = weak.lock()) p->wake();
    });
  }
  if (helped_) {
    out_->set_consumer_help([weak = weak_from_this()] {
      auto p = weak.lock();
      return p && p->publish_here();
    });
  }
}

void kernel_proxy::require_resident(std::string_view why) {
  const std::string who = "kernel '" + spec_.name + "' on device '" + dev_.name() + "'";
  if (started_) throw error(errc::invalid_argument, who + " was started before " + std::string(why));
  if (options_.mode && *options_.mode != kernel_mode::persistent) {
    throw error(errc::unsupported_mode, who + " is forced to run " + std::string(to_string(*options_.mode)) + ", but " +
                                            std::string(why) + " needs it persistent (resident while it waits)");
  }
  if (!dev_.info().supports(kernel_mode::persistent))
    throw error(errc::unsupported_mode, who + " cannot run persistent, which " + std::string(why) + " needs");
  options_.mode = kernel_mode::persistent;
}

void kernel_proxy::set_launch_gate(std::shared_ptr<launch_gate> gate) {
  const std::string who = "kernel '" + spec_.name + "' on device '" + dev_.name() + "'";
  if (started_) throw error(errc::invalid_argument, who + ": set_launch_gate after start()");
  if (options_.mode && *options_.mode != kernel_mode::batched) {
    throw error(errc::unsupported_mode, who + " is forced to run " + std::string(to_string(*options_.mode)) +
                                            ", but it arrives at a barrier through the host: one launch per phase, "
                                            "batched");
  }
  gate->attach([weak = weak_from_this()] {
    if (auto p = weak.lock()) p->wake();
  });
  gate_ = std::move(gate);
}

poll_result kernel_proxy::step() {
  const defer_wakes on_this_thread;       // the neighbours a completed batch wakes run here next
  if (has_output_) out_->withdraw_help(); // this step publishes what a completion offered
  if (finished_.load(std::memory_order_acquire)) return poll_result::done;
  if (reaping_) {
    // After a failure: the launch must return before its worker and memory are given back.
    if (!driver_->launch_returned()) return poll_result::idle;
    finish(kernel_state::faulted);
    return poll_result::done;
  }
  bool progress = false;
  try {
    progress = driver_->step();
  } catch (const std::exception& e) {
    fail(std::make_exception_ptr(
        error(errc::kernel_fault, "kernel '" + spec_.name + "' on device '" + dev_.name() + "' failed: " + e.what())));
  }
  if (finished_.load(std::memory_order_acquire)) return poll_result::done;
  poller_->set_ceiling(driver_->idle_ceiling()); // the adaptive driver's changes with its phase
  if (progress) return poll_result::progress;
  if (driver_->completion_wakes()) return poll_result::waiting;
  if (has_input_ && !driver_->in_flight() && ask_for_push_wake()) return poll_result::dormant;
  if (has_output_ && !driver_->in_flight() && promise_room()) return poll_result::dormant;
  return poll_result::idle;
}

// Held by a full output a while (its consumer does not pop): asleep until the pop that frees
// what the driver waits for, where the output promises it (no device pops it).
bool kernel_proxy::promise_room() {
  const std::uint32_t room = driver_->room_wanted();
  return room > 0 && poller_->backed_off() && out_->promise_pop_wake(room);
}

// A kernel with nothing in flight and nothing queued waits for input: the next host push (an
// application's inlet, a host stage, a staged link) wakes the proxy at once instead of at its next
// poll, which is up to 1 ms away (the latency a batched or parked kernel paid per message). Not
// asked with messages queued: the driver then waits for something else (a worker, a gate). Idle
// a while, it asks for a promise instead, and true says it may sleep until the push comes.
bool kernel_proxy::ask_for_push_wake() {
  if (in_->size() != 0 || in_->closed()) return false;
  if (poller_->backed_off() && in_->promise_push_wake()) return true;
  in_->want_push_wake();
  if (in_->size() != 0 || in_->closed()) poller_->wake(); // pushed while asking
  return false;
}

bool kernel_proxy::acquire_worker() {
  if (dev_.info().persistent_budget == 0 || slot_) return true;
  slot_ = first_slot_ ? std::move(first_slot_) : dev_.budget().try_acquire(mode_, spec_.name);
  return static_cast<bool>(slot_);
}

namespace {
constexpr std::string_view loop_limit_note = "Mesa's llvmpipe ends every loop of a launch once 65535 iterations "
                                             "have run in all";
constexpr std::uint32_t error_reserved = 0xffff0000u;  // RP_ERROR_RESERVED in stage.clh
constexpr std::uint32_t error_loops_cut = 0xffff0001u; // RP_ERROR_LOOPS_CUT_SHORT
constexpr std::uint32_t error_barrier = 0xffff0002u;   // RP_ERROR_BARRIER_FAILED in barrier.clh

std::string describe_kernel_error(std::uint32_t code) {
  if (code == error_loops_cut) {
    return "was cut short by its driver in the middle of a round (" + std::string(loop_limit_note) +
           "); its state may hold part of that round, so the round was not redone: give it smaller batches "
           "(kernel_options::batch_capacity) or shorter per-message loops";
  }
  if (code == error_round_too_long) {
    return "cannot run its messages on this device: the first round of a launch, a message per work-item, was "
           "cut short by the driver (" +
           std::string(loop_limit_note) +
           ", counted per work-item), so every relaunch would be cut short again; its messages are still in its "
           "input ring. Shorten the per-message loop (split the work over several messages or stages) or place the "
           "stage on another device";
  }
  if (code == error_barrier)
    return "left because a barrier it waited at failed (the barrier's error, from its wait or fail, says why)";
  if (code >= error_reserved)
    return "reported ringpipe error code " + std::to_string(code) + ", which this host does not know";
  return "reported error code " + std::to_string(code);
}
} // namespace

bool kernel_proxy::after_exit(kernel_state state, std::uint32_t code) {
  switch (state) {
  case kernel_state::faulted:
    fail(std::make_exception_ptr(error(errc::kernel_fault, "kernel '" + spec_.name + "' on device '" + dev_.name() +
                                                               "' " + describe_kernel_error(code))));
    return false;
  case kernel_state::stopped:
    if (stop_requested() == kernel_stop::run && !stream_ended()) {
      // Nobody asked it to stop and it did not end its stream: whatever waits on it would hang.
      fail(std::make_exception_ptr(
          error(errc::kernel_fault, "kernel '" + spec_.name + "' on device '" + dev_.name() +
                                        "' stopped on its own before its stream ended (" +
                                        (has_output_ ? "output ring '" + out_->name() + "' not closed"
                                                     : "input ring '" + in_->name() + "' not drained") +
                                        ")")));
      return false;
    }
    return finish(kernel_state::stopped);
  case kernel_state::parked: counters_.state.store(kernel_state::parked); return true;
  default:
    fail(std::make_exception_ptr(
        error(errc::kernel_fault, "kernel '" + spec_.name + "' on device '" + dev_.name() +
                                      "' returned without saying how it ended (state " + std::string(to_string(state)) +
                                      "): it returned without rp_end, or the driver cut it short (" +
                                      std::string(loop_limit_note) + ")")));
    return false;
  }
}

// The kernel ended its stream: closed its output, or (a sink) consumed its input to the end.
bool kernel_proxy::stream_ended() { return has_output_ ? out_->closed() : !has_input_ || in_->drained(); }

bool kernel_proxy::finish(kernel_state state) {
  slot_.release();
  first_slot_.release();
  counters_.state.store(state);
  exited();
  {
    std::lock_guard lock(mutex_);
    finished_.store(true, std::memory_order_release);
  }
  done_.notify_all();
  return false;
}

void kernel_proxy::fail(std::exception_ptr e) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(e);
  }
  if (!driver_ || !driver_->in_flight()) {
    finish(kernel_state::faulted);
    return;
  }
  // A failed kernel that still runs is left to return on its own: its memory stays alive in the
  // proxy, which the poller keeps while it waits (step() reaps it).
  reaping_ = true;
  counters_.state.store(kernel_state::faulted);
  exited();
  std::lock_guard lock(mutex_);
  done_.notify_all();
}

void kernel_proxy::request_stop(kernel_stop s) {
  auto current = stop_request_.load();
  while (static_cast<std::uint32_t>(s) > static_cast<std::uint32_t>(current) &&
         !stop_request_.compare_exchange_weak(current, s)) {
  }
  if (driver_) driver_->stop_requested(stop_request_.load());
  wake();
}

bool kernel_proxy::wait_finished(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mutex_);
  return done_.wait_for(lock, timeout, [&] { return finished_.load() || failure_ != nullptr; });
}

bool kernel_proxy::wait_exited(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mutex_);
  return done_.wait_for(lock, timeout, [&] { return finished_.load(); });
}

void kernel_proxy::release_device_objects() noexcept {
  if (driver_ && driver_->in_flight() && !driver_->launch_returned()) {
    // A launch that never returned still reads and writes this memory, and releasing its queue
    // would wait for it: leak it all, and say so.
    std::fprintf(stderr, "ringpipe: kernel '%s' on device '%s' never returned; its device objects are left allocated\n",
                 spec_.name.c_str(), dev_.name().c_str());
    helped_ = false;
    leak(std::move(driver_));
    leak(std::move(*image_));
    image_.reset();
    leak(std::move(in_));
    leak(std::move(out_));
    for (auto& owner : kept_alive_)
      leak(std::move(owner));
    has_input_ = has_output_ = false;
    return;
  }
  if (driver_) driver_->release();
  helped_ = false;
  if (image_) image_->release();
  in_.reset(); // rings the kernel was the last to hold (SVM or device memory)
  out_.reset();
  has_input_ = has_output_ = false;
}

bool kernel_proxy::release_on_strand(std::chrono::nanoseconds timeout) {
  // After the step that saw the kernel exit has returned.
  auto released = std::make_shared<std::promise<void>>();
  auto done = released->get_future();
  boost::asio::dispatch(executor_->strand(), [self = shared_from_this(), released] {
    // Not beside the end of a step that an application's push ran (poller::run_here).
    self->poller_->exclusive([&self] { self->release_device_objects(); });
    released->set_value();
  });
  return done.wait_for(timeout) == std::future_status::ready;
}

kernel_stats kernel_proxy::stats() const noexcept {
  kernel_stats s;
  s.msgs_in = counters_.msgs_in.load(std::memory_order_relaxed);
  s.msgs_out = counters_.msgs_out.load(std::memory_order_relaxed);
  s.launches = counters_.launches.load(std::memory_order_relaxed);
  s.overlapped_launches = counters_.overlapped.load(std::memory_order_relaxed);
  s.work_groups = counters_.work_groups.load(std::memory_order_relaxed);
  s.handovers = counters_.handovers.load(std::memory_order_relaxed);
  if (driver_) s.heartbeat = driver_->heartbeat();
  if (driver_ && failure()) s.lost = driver_->uncounted();
  return s;
}

std::string kernel_proxy::describe() const {
  std::string s = "kernel '" + spec_.name + "' on device '" + dev_.name() + "' (" + std::string(to_string(mode_)) +
                  ", state " + std::string(to_string(state())) + ")";
  if (has_input_ && in_) s += ", " + std::to_string(in_->size()) + " messages queued in ring '" + in_->name() + "'";
  if (has_output_ && out_)
    s += ", output ring '" + out_->name() + "' fill " + std::to_string(out_->size()) + "/" +
         std::to_string(out_->capacity());
  return s;
}

} // namespace ringpipe::detail
