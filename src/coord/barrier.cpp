// The barrier's state: the phase in progress and each participant's arrival as 32-bit words on
// their own 64-byte lines (a participant's word holds the phase it last arrived at, plus one), so
// that arriving is one store to the participant's own line and waiting reads one word. Host
// participants coordinate under a mutex: the last to arrive runs the completion function and
// advances the phase; waiters spin briefly, then sleep on a condition variable (a thread that
// spins takes a core a PoCL kernel may need).

#include <ringpipe/backoff.hpp>
#include <ringpipe/barrier.hpp>
#include <ringpipe/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_set>

namespace ringpipe {
namespace {

using clock = std::chrono::steady_clock;

struct alignas(64) barrier_line {
  std::atomic<std::uint32_t> value{0};
};
static_assert(sizeof(barrier_line) == 64);

/// Phase `a` comes before phase `b`, across the 32-bit wrap.
bool before(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) < 0; }

std::string ms(clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", std::chrono::duration<double, std::milli>(d).count());
  return text;
}

// The last `capacity` wait times of one participant, for percentiles.
class wait_samples {
public:
  void add(double us) {
    if (samples_.size() < capacity) {
      samples_.push_back(us);
    } else {
      samples_[next_] = us;
    }
    next_ = (next_ + 1) % capacity;
  }
  double percentile(double p) const {
    if (samples_.empty()) return 0;
    auto sorted = samples_;
    const auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(at), sorted.end());
    return sorted[at];
  }

private:
  static constexpr std::size_t capacity = 4096;
  std::vector<double> samples_;
  std::size_t next_ = 0;
};

struct participant_state {
  std::string name;
  barrier_line arrived; // the phase last arrived at, plus one
  std::uint64_t arrivals = 0, waits = 0, last_to_arrive = 0;
  wait_samples waited;
};

} // namespace

struct barrier::state {
  barrier_options options;
  barrier_line phase; // the phase in progress: every phase before it is released
  std::vector<participant_state> participants;
  mutable std::mutex mutex;
  std::condition_variable released;
  std::size_t arrived = 0;         // participants arrived in the phase in progress
  clock::time_point first_arrival; // of the phase in progress
  std::optional<clock::time_point> completing_since;
  std::atomic<bool> failed{false};
  std::optional<error> failure;
  std::uint64_t phases = 0;

  std::string label() const { return "barrier '" + options.name + "'"; }
  bool released_phase(std::uint32_t p) const noexcept { return before(p, phase.value.load(std::memory_order_acquire)); }
  // Under the mutex.
  void fail_locked(error e) {
    if (failure) return;
    failure.emplace(std::move(e));
    failed.store(true, std::memory_order_release);
    released.notify_all();
  }
  error timeout_error(std::uint32_t p, clock::time_point now) const;
};

error barrier::state::timeout_error(std::uint32_t p, clock::time_point now) const {
  if (completing_since) {
    return error(errc::timeout, label() + " phase " + std::to_string(p) +
                                    ": its completion function has not returned after " + ms(now - *completing_since));
  }
  std::string missing, present;
  for (const auto& q : participants) {
    auto& list = q.arrived.value.load(std::memory_order_relaxed) == p + 1 ? present : missing;
    list += (list.empty() ? "'" : ", '") + q.name + "'";
  }
  return error(errc::timeout, label() + " phase " + std::to_string(p) + " timed out after " + ms(now - first_arrival) +
                                  ": " + missing + " did not arrive (" + (present.empty() ? "none" : present) +
                                  " did)");
}

barrier::barrier(std::vector<std::string> participants, barrier_options options) : s_(std::make_unique<state>()) {
  s_->options = std::move(options);
  if (participants.empty()) throw error(errc::invalid_argument, s_->label() + " needs at least one participant");
  std::unordered_set<std::string> seen;
  s_->participants = std::vector<participant_state>(participants.size());
  for (std::size_t i = 0; i < participants.size(); ++i) {
    if (!seen.insert(participants[i]).second)
      throw error(errc::invalid_argument, s_->label() + " names participant '" + participants[i] + "' twice");
    s_->participants[i].name = std::move(participants[i]);
    // Arrived at the phase before the first: not at the first.
    s_->participants[i].arrived.value.store(s_->options.first_phase, std::memory_order_relaxed);
  }
  s_->phase.value.store(s_->options.first_phase, std::memory_order_release);
}

barrier::~barrier() = default;

std::size_t barrier::participant(std::string_view name) const {
  std::string names;
  for (std::size_t i = 0; i < s_->participants.size(); ++i) {
    if (s_->participants[i].name == name) return i;
    names += (i == 0 ? "'" : ", '") + s_->participants[i].name + "'";
  }
  throw error(errc::invalid_argument,
              s_->label() + " has no participant '" + std::string(name) + "' (its participants: " + names + ")");
}

std::size_t barrier::size() const noexcept { return s_->participants.size(); }
const std::string& barrier::name() const noexcept { return s_->options.name; }
bool barrier::failed() const noexcept { return s_->failed.load(std::memory_order_acquire); }
std::uint32_t barrier::phase() const noexcept { return s_->phase.value.load(std::memory_order_acquire); }

barrier_token barrier::arrive(std::size_t who) {
  auto& s = *s_;
  std::unique_lock lock(s.mutex);
  if (s.failure) throw *s.failure;
  if (who >= s.participants.size())
    throw error(errc::invalid_argument, s.label() + " has no participant " + std::to_string(who) + " (it has " +
                                            std::to_string(s.participants.size()) + ")");
  auto& me = s.participants[who];
  const std::uint32_t p = s.phase.value.load(std::memory_order_relaxed);
  if (me.arrived.value.load(std::memory_order_relaxed) == p + 1)
    throw error(errc::invalid_argument, s.label() + ": participant '" + me.name + "' arrived twice in phase " +
                                            std::to_string(p) + " (wait for the phase before arriving again)");
  me.arrived.value.store(p + 1, std::memory_order_release);
  ++me.arrivals;
  if (s.arrived++ == 0) s.first_arrival = clock::now();
  if (s.arrived < s.participants.size()) return {who, p};
  ++me.last_to_arrive;
  if (s.options.on_phase) {
    // Outside the lock: the completion may read the barrier's stats.
    s.completing_since = clock::now();
    lock.unlock();
    std::optional<error> thrown;
    try {
      s.options.on_phase(p);
    } catch (const std::exception& e) {
      thrown.emplace(errc::stage_failed,
                     s.label() + " phase " + std::to_string(p) + ": its completion function threw: " + e.what());
    }
    lock.lock();
    s.completing_since.reset();
    if (thrown) {
      s.fail_locked(*thrown);
      throw *thrown;
    }
  }
  s.arrived = 0;
  ++s.phases;
  s.phase.value.store(p + 1, std::memory_order_release);
  s.released.notify_all();
  return {who, p};
}

void barrier::wait(const barrier_token& token) {
  auto& s = *s_;
  const auto t0 = clock::now();
  const auto done = [&] {
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    std::lock_guard lock(s.mutex);
    auto& me = s.participants.at(token.participant);
    ++me.waits;
    me.waited.add(us);
  };
  // A released phase stays released, also after a later failure.
  backoff spin;
  // About 10 us of pauses, then 64 yields (the arrival a waiter needs may be on its own core).
  for (int i = 0; i < 320; ++i, spin.wait()) {
    if (s.released_phase(token.phase)) return done();
    if (s.failed.load(std::memory_order_acquire)) break;
  }
  std::unique_lock lock(s.mutex);
  for (;;) {
    if (s.released_phase(token.phase)) {
      lock.unlock();
      return done();
    }
    if (s.failure) throw *s.failure;
    if (s.failed.load(std::memory_order_relaxed)) throw error(errc::cancelled, s.label() + " failed");
    const auto now = clock::now();
    const auto deadline = (s.completing_since ? *s.completing_since : s.first_arrival) + s.options.timeout;
    if (now >= deadline) {
      s.fail_locked(s.timeout_error(token.phase, now));
      throw *s.failure;
    }
    s.released.wait_until(lock, deadline);
  }
}

void barrier::fail(std::string_view reason) noexcept {
  auto& s = *s_;
  try {
    std::lock_guard lock(s.mutex);
    s.fail_locked(error(errc::cancelled, s.label() + " failed in phase " +
                                             std::to_string(s.phase.value.load(std::memory_order_relaxed)) + ": " +
                                             std::string(reason)));
  } catch (...) {
    // Out of memory composing the message: the waiters still learn of it.
    s.failed.store(true, std::memory_order_release);
    s.released.notify_all();
  }
}

barrier_stats barrier::stats() const {
  std::lock_guard lock(s_->mutex);
  barrier_stats out;
  out.name = s_->options.name;
  out.phases = s_->phases;
  for (const auto& q : s_->participants)
    out.participants.push_back(
        {q.name, q.arrivals, q.waits, q.last_to_arrive, q.waited.percentile(0.5), q.waited.percentile(0.99)});
  return out;
}

std::string barrier_stats::table() const {
  std::ostringstream t;
  t << "barrier '" << name << "': " << phases << " phases\n";
  char line[160];
  std::snprintf(line, sizeof(line), "%-24s %10s %10s %12s %12s %14s\n", "participant", "arrivals", "waits",
                "wait p50 us", "wait p99 us", "last to arrive");
  t << line;
  for (const auto& p : participants) {
    std::snprintf(line, sizeof(line), "%-24s %10llu %10llu %12.1f %12.1f %14llu\n", p.name.c_str(),
                  static_cast<unsigned long long>(p.arrivals), static_cast<unsigned long long>(p.waits), p.wait_p50_us,
                  p.wait_p99_us, static_cast<unsigned long long>(p.last_to_arrive));
    t << line;
  }
  return t.str();
}

} // namespace ringpipe
