#pragma once
// A barrier over named participants: every participant finishes phase k (arrives) before any
// starts phase k+1 (is released). Split-phase (arrive, then wait with the token) or blocking
// (arrive_and_wait); an optional completion function runs once per phase on the host, after every
// participant arrived and before any is released, like the completion step of std::barrier.
//
// It never hangs: a phase whose participants have not all arrived within the timeout (counted
// from the phase's first arrival) fails the barrier, naming who did not arrive, the phase and who
// did; fail() (a participant that stopped or failed) releases every waiter with its reason. Both
// reach every waiter at once, and every later call.
//
// Participants are host threads (by name) and ring kernels, which arrive from their device code
// (cl/ringpipe/barrier.clh) by writing words in fine-grained SVM: no host round trip, and the last
// to arrive releases the phase, unless a completion function must run on the host first. A batched
// kernel on a device without shared memory runs one phase per launch and the host arrives for it
// (rp_barrier_relay), launching it again once the phase is released.
// Phases are numbered by a 32-bit counter that only grows and wraps (never reset); each
// participant's arrival and the phase in progress are words on their own 64-byte lines.

#include <ringpipe/error.hpp>
#include <ringpipe/metrics.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringpipe {

class ring_kernel_base;

/// One participant: a host participant by name, or a ring kernel. Where the kernel's device shares
/// fine-grained SVM with atomics, the barrier binds its seat (`__global rp_barrier_seat*`) to its
/// own argument `seat_arg` and keeps it resident (persistent) so that it waits on the device;
/// elsewhere `seat_arg` is not used and the kernel arrives per launch (rp_barrier_relay). A kernel
/// is named `name`, or by default "KERNEL@DEVICE" (its name and its device's index).
class barrier_participant {
public:
  barrier_participant(const char* name) : name_(name) {}            // NOLINT(google-explicit-constructor)
  barrier_participant(std::string name) : name_(std::move(name)) {} // NOLINT(google-explicit-constructor)
  barrier_participant(ring_kernel_base& kernel, unsigned seat_arg, std::string name = {});

  const std::string& name() const noexcept { return name_; }
  ring_kernel_base* kernel() const noexcept { return kernel_; }
  unsigned seat_arg() const noexcept { return seat_arg_; }

private:
  std::string name_;
  ring_kernel_base* kernel_ = nullptr;
  unsigned seat_arg_ = 0;
};

struct barrier_options {
  std::string name = "barrier";
  /// How long a phase may wait for its last participant after its first one arrived.
  std::chrono::nanoseconds timeout = std::chrono::seconds(10);
  /// Runs once per phase (its argument: the phase's number) on the thread of the last participant
  /// to arrive, before any is released. If it throws, the barrier fails with its message.
  std::function<void(std::uint32_t phase)> on_phase = nullptr;
  /// The first phase's number (tests of the 32-bit wrap).
  std::uint32_t first_phase = 0;
  /// Every ring kernel arrives through the host, one phase per launch (it must be written for
  /// that: rp_barrier_next, its progress in its own memory; cl/ringpipe/barrier.clh), also where it
  /// could wait on its device. For barriers with host participants on a machine whose cores run the
  /// devices' workers too (PoCL): kernels waiting on their devices spin on those cores, and each
  /// phase then waits for a host participant to get a time slice (milliseconds).
  bool kernels_through_host = false;
  /// Runs once, when the barrier fails, with its error (any thread; it must not block or call the
  /// barrier): for the layers above, such as a barrier over ranks that tells the other ranks.
  std::function<void(const error&)> on_failure = nullptr;
};

/// What arrive() returns and wait() takes.
struct barrier_token {
  std::size_t participant = 0;
  std::uint32_t phase = 0; ///< the phase arrived at
};

class barrier {
public:
  /// `participants`: at least one, with distinct names. Ring kernels must not be started yet;
  /// those that wait on their devices must share one context, and a barrier whose kernels could
  /// not all be resident at once (the device's persistent budget) is refused, as is one whose
  /// kernel is forced into a mode other than persistent, with the reason. Destroying a barrier fails it: kernels and
  /// threads still waiting on it are released with that error (a call must not begin on a destroyed barrier).
  explicit barrier(std::vector<barrier_participant> participants, barrier_options options = {});
  ~barrier();
  barrier(const barrier&) = delete;
  barrier& operator=(const barrier&) = delete;

  /// A participant's index by name; an unknown name is refused, listing the participants.
  std::size_t participant(std::string_view name) const;
  std::size_t size() const noexcept;
  const std::string& name() const noexcept;

  /// Arrives at the phase in progress. A participant arrives once per phase: arriving again
  /// before the phase is released is refused. Throws the barrier's error once it failed.
  [[nodiscard]] barrier_token arrive(std::size_t participant);
  /// Returns once the token's phase is released; throws errc::timeout (naming who did not
  /// arrive) or the failure's error.
  void wait(const barrier_token& token);
  void arrive_and_wait(std::size_t participant);

  /// Fails the barrier with `reason` (errc::cancelled): every waiter, now and later, gets it (a
  /// kernel's rp_barrier_wait returns RP_BARRIER_FAILED). The first failure stays.
  void fail(std::string_view reason) noexcept;
  bool failed() const noexcept;
  /// The error the barrier failed with (what its waiters get), once it failed: where only kernels
  /// take part, the place to read why their waits ended.
  std::optional<error> failure() const;
  /// The phase in progress.
  std::uint32_t phase() const noexcept;
  barrier_stats stats() const;

private:
  struct state;
  static void wait_on(state& s, const barrier_token& token);
  void fail_as(std::string_view what, std::string_view reason) noexcept;
  std::shared_ptr<state> s_; // shared with the kernels' exit handlers, which hold it weakly
};

} // namespace ringpipe
