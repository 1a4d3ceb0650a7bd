#pragma once
// The one polling loop of the actor runtime. Kernel proxies and host stages call `step()` on
// their own executor (a strand); it answers whether it made progress, and the poller decides
// when to call it again: at once while work flows and for a short spin window after, then on a
// timer that doubles up to a ceiling, and a step idle that long may go dormant until the push it
// was promised wakes it, so an idle pipeline costs nothing. A paced poller (a host
// stage under the throughput objective) told how many messages each step moved sleeps, after
// progress, as long as the last rate takes to bring its pace of messages (within the first sleep
// and the ceiling), so that a stage beside a slow kernel wakes a few times per ring instead of
// once per message or two. `wake()` (a stop, the end of a stream) cuts any sleep short; `nudge()`
// (new work) cuts any but a paced one; `run_here()` runs the step at once on the calling thread
// (an application's push into an idle kernel: the launch without an io thread's wake first).
// Steps never overlap: a run that finds one running leaves the next to it.
//
// The executor is injected: the runtime's is a strand with a steady timer, and tests step a
// manual one by hand, with no threads and no sleeps.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

namespace ringpipe::detail {

class poller;

/// Where and when a poller's steps run (besides run_here()). Steps of one executor never run
/// concurrently.
class poll_executor {
public:
  using clock = std::chrono::steady_clock;
  virtual ~poll_executor() = default;
  virtual clock::time_point now() const = 0;
  /// Runs `p.run()` soon.
  virtual void post(poller& p) = 0;
  /// Runs `p.run()` at `when`, replacing an earlier timed run of this executor.
  virtual void post_at(poller& p, clock::time_point when) = 0;
  /// Cancels the timed run, if any.
  virtual void cancel_timer() noexcept = 0;
};

struct poll_timing {
  std::chrono::microseconds spin_window{0};  ///< after progress, re-poll at once this long (where spinning helps)
  std::chrono::microseconds first_sleep{40}; ///< then sleep this long,
  std::chrono::microseconds ceiling{1000};   ///< doubling up to this
  /// Messages a turn should find (0: not paced): after progress the first sleep is the time the
  /// rate since the last sleep takes to bring this many, within first_sleep and ceiling.
  std::uint32_t pace = 0;
};

/// Host stages re-poll at once for a short window after progress (a message in flight arrives
/// within microseconds), then sleep up to 1 ms.
inline constexpr poll_timing host_stage_timing{std::chrono::microseconds(200), std::chrono::microseconds(50),
                                               std::chrono::microseconds(1000)};
/// Kernel proxies only launch and watch: they back off at once; their driver sets the ceiling.
inline constexpr poll_timing kernel_proxy_timing{std::chrono::microseconds(0), std::chrono::microseconds(40),
                                                 std::chrono::microseconds(1000)};

/// A dormant poller's timer: only a safety net (the wake it was promised comes by itself), long
/// enough that an idle pipeline's stages wake a few times a second in all.
inline constexpr std::chrono::milliseconds dormant_sleep{250};

/// What one step found.
enum class poll_result {
  progress,  ///< did work: poll again at once
  caught_up, ///< did work and found no more (a partial turn): sleep as after progress
  idle,      ///< nothing to do: back off
  waiting,   ///< nothing to do until a wake that will come (a launch's completion): sleep the ceiling
  dormant,   ///< nothing to do until a push it was promised wakes it (idle a while): sleep dormant_sleep
  done,      ///< left its loop: never poll again
};

class poller {
public:
  using step_fn = std::function<poll_result()>;

  poller(std::shared_ptr<poll_executor> executor, poll_timing timing, step_fn step)
      : executor_(std::move(executor)), timing_(timing), step_(std::move(step)) {}

  /// Schedules the first step; `owner` is kept alive while a step is pending.
  void start(std::weak_ptr<void> owner);
  /// Cuts a sleep short: the next step runs soon, the backoff starts over. Any thread.
  void wake();
  /// New work for it (a neighbour pushed or took): wake(), unless it sleeps a paced sleep, whose
  /// timer comes when the work it paced for has come (at most the ceiling). Any thread.
  void nudge();
  /// Runs one step and schedules the next (called by the executor).
  void run();
  /// Runs `fn` where no step runs, waiting for one that runs elsewhere to end (what the owner
  /// does beside its steps, such as releasing what they use once they are done).
  template <class Fn> void exclusive(Fn&& fn) {
    while (stepping_.exchange(true))
      std::this_thread::yield();
    const step_claim claimed{stepping_};
    fn();
  }
  /// Runs a step now on the calling thread, as a wake would soon on the executor; where a step
  /// runs already (elsewhere, or further up this thread), that one has the executor run another.
  /// A step that made progress is followed by up to `steps` - 1 more there (the looks the
  /// executor would take at once after it, without waking an io thread for them). Any thread;
  /// what follows is the executor's.
  void run_here(unsigned steps = 1);

  void set_ceiling(std::chrono::microseconds ceiling) noexcept { timing_.ceiling = ceiling; }
  /// See poll_timing::pace: before start(), or from the step (a stage whose rings' use changed).
  void set_pace(std::uint32_t messages) noexcept {
    std::atomic_ref(timing_.pace).store(messages, std::memory_order_relaxed);
  }
  /// The pace now. Any thread.
  std::uint32_t pace() const noexcept {
    return std::atomic_ref(const_cast<std::uint32_t&>(timing_.pace)).load(std::memory_order_relaxed);
  }
  /// From the step: it moved `n` messages (paced pollers count them).
  void moved(std::size_t n) noexcept { paced_ += n; }
  /// Before start(): how long to re-poll at once after progress (0: back off at once).
  void set_spin_window(std::chrono::microseconds window) noexcept { timing_.spin_window = window; }
  const poll_timing& timing() const noexcept { return timing_; }
  /// The sleep chosen after the last idle step (0 while spinning).
  std::chrono::microseconds delay() const noexcept { return delay_; }
  /// From the step: whether the sleep just ended was an idle one of the ceiling (or dormant), not
  /// cut short: the step has been idle a while, and may ask for a promised wake
  /// (promise_push_wake) to go dormant. Not after a `waiting` sleep, which a completion ends.
  bool backed_off() const noexcept { return backed_off_; }
  bool stopped() const noexcept { return done_; }
  std::shared_ptr<void> owner() const noexcept { return owner_.lock(); }
  const poll_executor& executor() const noexcept { return *executor_; }

private:
  static bool may_spin() noexcept;
  /// The first sleep after progress; starts the next pace window.
  std::chrono::microseconds first_sleep(poll_executor::clock::time_point now) noexcept;

  std::shared_ptr<poll_executor> executor_;
  poll_timing timing_;
  step_fn step_;
  std::weak_ptr<void> owner_;
  poll_executor::clock::time_point last_progress_{};
  std::chrono::microseconds delay_{0};
  std::uint64_t paced_ = 0;                      // messages moved since pace_from_
  poll_executor::clock::time_point pace_from_{}; // the last sleep's start
  bool idle_sleep_ = false;                      // the sleep set is a second or later one without progress
  bool backing_off_ = false;                     // the sleep set is an idle one of the ceiling, or dormant
  bool backed_off_ = false;                      // backing_off_ of the sleep before the running step
  bool done_ = false;
  std::atomic<bool> posted_{false}; // a run is posted and has not started: wakes need not post another
  std::atomic<bool> woken_{false};
  std::atomic<bool> started_{false};     // start() has set the owner and posted the first step
  std::atomic<bool> paced_sleep_{false}; // the timer set is a sleep that pacing made longer than first_sleep
  std::atomic<bool> stepping_{false};    // a step runs: steps never overlap, on the executor or in run_here()
  std::atomic<bool> missed_{false};      // a run found a step running elsewhere: that one posts again
  /// Gives stepping_ back when it ends (a step that throws too).
  struct step_claim {
    std::atomic<bool>& stepping;
    explicit step_claim(std::atomic<bool>& s) noexcept : stepping(s) {}
    step_claim(const step_claim&) = delete;
    step_claim& operator=(const step_claim&) = delete;
    ~step_claim() { stepping.store(false); }
  };
  void run_exclusive(unsigned steps);
  void run_step(unsigned steps);
};

} // namespace ringpipe::detail
