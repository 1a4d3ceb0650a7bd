// The barrier's protocol on the host (the device half is cl/ringpipe/barrier.clh): arriving writes
// the participant's seat and adds one to the phase's arrivals; the last to arrive runs the
// completion function, if any, and releases the phase by resetting the arrivals and advancing the
// phase. A kernel that arrives last while a completion function must run leaves that to the host:
// a host waiter or the watcher (barrier_kernels.cpp) sees every arrival in and completes the
// phase. Waiters spin briefly, then sleep on the barrier's release count (a futex: no mutex
// between a release and its waiters) until a release, the phase's deadline, or, where kernels
// release phases on their devices, a step that grows from 20 to 500 us.

#include "barrier_state.hpp"

#include "../core/word_wait.hpp"

#include <ringpipe/backoff.hpp>
#include <ringpipe/detail/blocked_wait.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ringpipe {
namespace detail {

void wait_samples::add(double us) noexcept {
  const auto n = samples_->added.load(std::memory_order_relaxed);
  samples_->us[n % capacity].store(static_cast<float>(us), std::memory_order_relaxed);
  samples_->added.store(n + 1, std::memory_order_release);
}

double wait_samples::percentile(double p) const {
  const auto n = std::min(samples_->added.load(std::memory_order_acquire), capacity);
  if (n == 0) return 0;
  std::vector<float> sorted(n);
  for (std::size_t i = 0; i < n; ++i)
    sorted[i] = samples_->us[i].load(std::memory_order_relaxed);
  const auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(at), sorted.end());
  return sorted[at];
}

namespace {
std::string ms(barrier_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", std::chrono::duration<double, std::milli>(d).count());
  return text;
}
} // namespace
} // namespace detail

using detail::barrier_clock;

void barrier::state::fail_locked(error e) {
  if (failure) return;
  failure.emplace(std::move(e));
  header().failed.store(1, std::memory_order_release);
  wake_waiters();
  wake_watcher.notify_all();
  wake_relayed();
  if (options.on_failure) {
    try {
      options.on_failure(*failure);
    } catch (...) { // the barrier has failed either way
    }
  }
}

void barrier::state::wake_waiters() noexcept {
  // Sequentially consistent, as the waiter's count and look (wait_on): either it sees the new
  // epoch, or this sees it counted and wakes it.
  release_epoch.fetch_add(1);
  if (sleepers.load() != 0) detail::wake_word_waiters(release_epoch);
}

void barrier::state::wake_relayed() const {
  for (const auto& m : members)
    if (m.wake) m.wake(); // posts to the kernel's strand: safe under the mutex
}

void barrier::state::fail(error e) {
  std::lock_guard lock(mutex);
  fail_locked(std::move(e));
}

error barrier::state::failure_error() const {
  std::lock_guard lock(mutex);
  return failure ? *failure : error(errc::cancelled, label() + " failed");
}

error barrier::state::timeout_error(std::uint32_t p, barrier_clock::time_point now) const {
  if (completing_since) {
    return error(errc::timeout, label() + " phase " + std::to_string(p) +
                                    ": its completion function has not returned after " +
                                    detail::ms(now - *completing_since));
  }
  std::string missing, present;
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto& list = seat(i).arrival.load(std::memory_order_acquire) == p + 1 ? present : missing;
    list += (list.empty() ? "'" : ", '") + members[i].name + "'";
  }
  const auto began = this->began(p).value_or(now);
  return error(errc::timeout, label() + " phase " + std::to_string(p) + " timed out after " + detail::ms(now - began) +
                                  ": " + missing + " did not arrive (" + (present.empty() ? "none" : present) +
                                  " did)");
}

std::optional<error> barrier::state::misplaced_device_step() const {
  const std::uint32_t step = header().device_step.load(std::memory_order_acquire);
  const bool host_completes = header().host_completes.load(std::memory_order_relaxed) != 0;
  if (step == 0 || step > members.size() || (!host_completes && !has_hosts)) return std::nullopt;
  const std::string why = options.on_phase ? "the barrier has a completion function on the host"
                          : host_completes ? "a participant arrives through the host: its device has no shared memory"
                                           : "host threads take part, and one arriving last releases the phase";
  return error(errc::invalid_argument, label() + ": participant '" + members[step - 1].name +
                                           "' completes phases on the device (rp_barrier_arrive_last), but the host "
                                           "would release phases without that step (" +
                                           why +
                                           "); a step on the device needs every participant to be a kernel waiting "
                                           "on its device, and no completion function");
}

std::optional<error> barrier::state::complete(std::uint32_t p) {
  if (auto misplaced = misplaced_device_step()) {
    fail(*misplaced);
    return misplaced;
  }
  std::lock_guard one(completing);
  auto& h = header();
  if (h.phase.load(std::memory_order_acquire) != p || h.arrived.load(std::memory_order_acquire) != size())
    return std::nullopt; // completed already, or not everyone is in
  if (options.on_phase) {
    {
      std::lock_guard lock(mutex);
      completing_since = barrier_clock::now();
    }
    std::optional<error> thrown;
    try {
      options.on_phase(p);
    } catch (const std::exception& e) {
      thrown.emplace(errc::stage_failed,
                     label() + " phase " + std::to_string(p) + ": its completion function threw: " + e.what());
    }
    std::lock_guard lock(mutex);
    completing_since.reset();
    if (thrown) {
      fail_locked(*thrown);
      return thrown;
    }
  }
  h.arrived.store(0, std::memory_order_relaxed);
  h.phase.store(p + 1, std::memory_order_release);
  wake_waiters();
  if (has_relayed) {
    std::lock_guard lock(mutex);
    wake_relayed();
  }
  return std::nullopt;
}

std::optional<barrier_clock::time_point> barrier::state::look_after(std::uint32_t p) {
  if (auto misplaced = misplaced_device_step()) {
    fail(*misplaced);
    return std::nullopt;
  }
  auto& h = header();
  const std::uint32_t arrived = h.arrived.load(std::memory_order_acquire);
  if (h.phase.load(std::memory_order_acquire) != p || arrived == 0) return std::nullopt;
  // Every participant in, and a kernel was last: a completion function runs here (a host that
  // arrives last completes the phase itself).
  if (has_kernels && arrived == size() && h.host_completes.load(std::memory_order_relaxed) != 0) (void)complete(p);
  note_began(p);
  if (!has_kernels && !options.on_phase) { // nothing to look at under the mutex but a timeout
    const auto now = barrier_clock::now();
    const auto deadline = began(p).value_or(now) + options.timeout;
    if (now < deadline) return deadline;
    std::lock_guard lock(mutex);
    if (!failure && !released_phase(p)) fail_locked(timeout_error(p, now));
    return std::nullopt;
  }
  std::lock_guard lock(mutex);
  if (failure || released_phase(p)) return std::nullopt;
  const auto now = barrier_clock::now();
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].departed && seat(i).arrival.load(std::memory_order_acquire) != p + 1) {
      fail_locked(error(errc::stage_failed, label() + " phase " + std::to_string(p) + ": participant '" +
                                                members[i].name + "' (a kernel on " + members[i].device +
                                                ") stopped before it arrived"));
      return std::nullopt;
    }
  }
  const auto deadline = completing_since.value_or(began(p).value_or(now)) + options.timeout;
  if (now >= deadline) {
    fail_locked(timeout_error(p, now));
    return std::nullopt;
  }
  return deadline;
}

std::size_t barrier::participant(std::string_view name) const {
  std::string names;
  for (std::size_t i = 0; i < s_->members.size(); ++i) {
    if (s_->members[i].name == name) return i;
    names += (i == 0 ? "'" : ", '") + s_->members[i].name + "'";
  }
  throw error(errc::invalid_argument,
              s_->label() + " has no participant '" + std::string(name) + "' (its participants: " + names + ")");
}

std::size_t barrier::size() const noexcept { return s_->members.size(); }
const std::string& barrier::name() const noexcept { return s_->options.name; }
bool barrier::failed() const noexcept { return s_->failed(); }
std::optional<error> barrier::failure() const {
  std::lock_guard lock(s_->mutex);
  return s_->failure;
}
std::uint32_t barrier::phase() const noexcept { return s_->header().phase.load(std::memory_order_acquire); }

barrier_token barrier::arrive(std::size_t who) {
  auto& s = *s_;
  if (who >= s.members.size())
    throw error(errc::invalid_argument, s.label() + " has no participant " + std::to_string(who) + " (it has " +
                                            std::to_string(s.members.size()) + ")");
  if (s.members[who].kernel)
    throw error(errc::invalid_argument, s.label() + ": participant '" + s.members[who].name +
                                            "' is a ring kernel: it arrives from its device code (rp_barrier_arrive)");
  return s.arrive_seat(who);
}

barrier_token barrier::state::arrive_seat(std::size_t who) {
  if (failed()) throw failure_error();
  auto& h = header();
  auto& me = seat(who);
  const std::uint32_t p = h.phase.load(std::memory_order_acquire);
  if (me.arrival.load(std::memory_order_relaxed) == p + 1)
    throw error(errc::invalid_argument, label() + ": participant '" + members[who].name + "' arrived twice in phase " +
                                            std::to_string(p) + " (wait for the phase before arriving again)");
  me.arrivals.fetch_add(1, std::memory_order_release); // stats() that sees it sees what came before
  me.arrival.store(p + 1, std::memory_order_release);
  if (h.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 < size()) {
    if (has_kernels) {
      (void)look_after(p); // a departed kernel fails the barrier now
      if (failed()) throw failure_error();
    } else {
      note_began(p);
    }
    return {who, p};
  }
  me.last.fetch_add(1, std::memory_order_relaxed);
  if (auto thrown = complete(p)) throw *thrown;
  return {who, p};
}

void barrier::arrive_and_wait(std::size_t participant) {
  const auto keep = s_; // a barrier destroyed meanwhile releases this wait with its error
  const auto token = arrive(participant);
  wait_on(*keep, token);
}

void barrier::wait(const barrier_token& token) {
  const auto keep = s_;
  wait_on(*keep, token);
}

void barrier::wait_on(state& s, const barrier_token& token) {
  const auto t0 = barrier_clock::now();
  const auto done = [&] {
    const double us = std::chrono::duration<double, std::micro>(barrier_clock::now() - t0).count();
    s.seat(token.participant).waits.fetch_add(1, std::memory_order_relaxed);
    s.members.at(token.participant).waited.add(us);
  };
  // A released phase stays released, also after a later failure. Where the cores hold every
  // participant that polls, about 10 us of pauses, then 64 yields (the arrival a waiter needs may
  // be on its own core); where they do not, a spin holds a core that arrival needs: a few yields.
  backoff spin;
  const int looks = s.waiters_spin ? 320 : 4;
  for (int i = 0; i < looks; ++i) {
    if (s.released_phase(token.phase)) return done();
    if (s.failed()) break;
    if (s.waiters_spin)
      spin.wait();
    else
      std::this_thread::yield();
  }
  auto step = std::chrono::microseconds(20);
  detail::blocked_wait blocked; // a host function's wait: the runtime runs the others meanwhile
  for (;;) {
    const std::uint32_t epoch = s.release_epoch.load();
    if (s.released_phase(token.phase)) return done();
    if (s.failed()) throw s.failure_error();
    const auto deadline = s.look_after(token.phase);
    const auto now = barrier_clock::now();
    auto until = deadline.value_or(now + s.options.timeout);
    // Phases a kernel releases on its device wake nobody: poll those. Phases the host completes
    // (host participants, a completion function, kernels arriving through the host) wake waiters.
    if (s.has_kernels && s.header().host_completes.load(std::memory_order_relaxed) == 0) {
      until = std::min(until, now + step);
      step = std::min(step * 2, std::chrono::microseconds(500));
    }
    blocked.sleeping();
    s.sleepers.fetch_add(1); // before the last look: see wake_waiters
    if (s.release_epoch.load() == epoch) detail::wait_while_word_is(s.release_epoch, epoch, until - now);
    s.sleepers.fetch_sub(1);
  }
}

void barrier::fail(std::string_view reason) noexcept { fail_as("failed", reason); }

void barrier::fail_as(std::string_view what, std::string_view reason) noexcept {
  auto& s = *s_;
  try {
    std::string text = s.label() + " " + std::string(what) + " in phase " + std::to_string(phase());
    if (!reason.empty()) text.append(": ").append(reason);
    s.fail(error(errc::cancelled, text));
  } catch (...) {
    // Out of memory composing the message: the waiters still learn of it.
    s.header().failed.store(1, std::memory_order_release);
    s.wake_waiters();
  }
}

barrier_stats barrier::stats() const {
  auto& s = *s_;
  std::lock_guard lock(s.mutex);
  barrier_stats out;
  out.name = s.options.name;
  out.phases = phase() - s.options.first_phase;
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    const auto& m = s.members[i];
    const auto& seat = s.seat(i);
    out.participants.push_back({m.name, m.kernel != nullptr, seat.arrivals.load(std::memory_order_acquire),
                                seat.waits.load(std::memory_order_relaxed), seat.last.load(std::memory_order_relaxed),
                                m.waited.percentile(0.5), m.waited.percentile(0.99)});
  }
  return out;
}

} // namespace ringpipe
