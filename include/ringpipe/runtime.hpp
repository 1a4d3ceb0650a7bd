#pragma once
// The host-side runtime: the devices, a Boost.Asio io_context with a small thread pool, and the
// executors that kernel proxies, host stages and device-bound host functions run on.

#include <ringpipe/topology.hpp>
#include <ringpipe/transfer.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace ringpipe {

namespace detail {
class transfer_service;
class io_step;
struct io_thread_state;
} // namespace detail

struct runtime_options {
  /// Threads running the io_context, fixed; 0: one per core this process may run on (its
  /// affinity mask: one under mpirun's binding), at most 2 to start with, and more while started
  /// pipelines have more host stages to run at once, up to host_cores (runtime::hold_threads).
  unsigned threads = 0;
  /// Where the runtime says what is not an error, e.g. a slow kernel build; null: a line on stderr.
  std::function<void(std::string_view)> notice = nullptr;
  /// A blocking step of start() (building a kernel) that takes longer than this is said through
  /// `notice`, with what it waits for, and again every 10 s; 0: every step is said as it begins.
  std::chrono::milliseconds slow_step_after{2000};
  /// Host cores the planner counts busy threads against (pipeline_objective::automatic); 0: the
  /// cores this process may run on (its affinity mask, not the machine's count).
  unsigned host_cores = 0;
};

class runtime;

/// What a caller asks of the runtime's io threads while it runs (runtime::hold_threads,
/// narrow_threads, stand_in_thread): held until this is destroyed or moved from.
class thread_hold {
public:
  thread_hold() = default;
  thread_hold(thread_hold&& other) noexcept;
  thread_hold& operator=(thread_hold&& other) noexcept;
  thread_hold(const thread_hold&) = delete;
  thread_hold& operator=(const thread_hold&) = delete;
  ~thread_hold();

private:
  friend class runtime;
  // hold_threads, narrow_threads, stand_in_thread, and run_on_device's task (released wherever it ran)
  enum class kind : unsigned char { grow, narrow, stand_in, task };
  thread_hold(runtime* rt, unsigned n, kind k) noexcept : rt_(rt), threads_(n), kind_(k) {}
  runtime* rt_ = nullptr;
  unsigned threads_ = 0;
  kind kind_ = kind::grow;
};

class runtime {
public:
  using executor_type = boost::asio::io_context::executor_type;
  using strand_type = boost::asio::strand<executor_type>;

  explicit runtime(topology devices = topology::discover(), runtime_options options = {});
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  const topology& devices() const noexcept { return topology_; }
  const device& device_at(std::size_t i) const { return topology_[i]; }
  boost::asio::io_context& io() noexcept { return io_; }
  executor_type executor() noexcept { return io_.get_executor(); }

  /// Says `text` through runtime_options::notice.
  void notice(std::string_view text) const;
  std::chrono::milliseconds slow_step_after() const noexcept { return options_.slow_step_after; }
  /// The io threads running now (those parked by narrow_threads() not counted).
  unsigned threads() const noexcept { return thread_count_.load(std::memory_order_acquire); }
  /// The most io threads this runtime runs: runtime_options::threads where set, else
  /// host_cores() (or the two it started with, where that is more).
  unsigned thread_limit() const noexcept;
  /// Asks for `n` io threads while the hold lives: the runtime grows to the sum of the holds alive,
  /// up to thread_limit(). A pipeline holds one per host stage it runs (and per kernel whose
  /// proxy copies its batches) from start() on, so that on a many-core host its stages run at
  /// once instead of taking turns on two threads. Threads are not stopped when a hold ends (an
  /// idle one sleeps); they all stop with the runtime.
  [[nodiscard]] thread_hold hold_threads(unsigned n);
  /// Asks that one io thread run while the hold lives and no hold_threads() hold does: the others
  /// park (each blocked in a handler, so the io_context wakes none of them) until it ends. For a
  /// pipeline whose kernels' workers on CPU devices already fill the host's cores (a farm of CPU
  /// devices): its host stages take turns on one thread instead of waking a second one on a core
  /// a worker is running on. While a running thread is held in one stage's step for more than
  /// 10 ms (a source or sink of the user's that blocks), a parked thread runs the other stages
  /// until that step returns. runtime_options::threads, where set, is kept.
  [[nodiscard]] thread_hold narrow_threads();
  /// Called on one of this runtime's io threads that is about to block until other work on the
  /// runtime is done (a host function that stops its pipeline waits for the other stages to
  /// leave): one more io thread runs while the hold lives (a parked one let go, or one started
  /// and parked again afterwards), so that work does not wait for the blocked thread. A runtime
  /// fixed at one thread too. One per blocked thread: a nested call (a pipeline's wait() joining
  /// its stages) and a call elsewhere (not an io thread of this runtime) get a hold that does
  /// nothing. Release it on the thread that took it.
  [[nodiscard]] thread_hold stand_in_thread();
  /// runtime_options::host_cores, or the cores this process may run on (at least 1).
  unsigned host_cores() const noexcept;

  /// The executor bound to one device: host functions posted to it run one at a time, in order
  /// (a strand), so work that drives one device's queues never races with itself.
  strand_type& device_executor(const device& dev) { return device_strands_.at(dev.index()); }

  /// Runs `fn()` on the device's executor; the future carries its result or exception. Called
  /// from one of this runtime's io threads (a host function, which may then wait for the future),
  /// one more io thread runs until `fn` has run, a runtime fixed at one thread too.
  template <class F> auto run_on_device(const device& dev, F&& fn) -> std::future<std::invoke_result_t<F&>> {
    std::packaged_task<std::invoke_result_t<F&>()> task(std::forward<F>(fn));
    auto future = task.get_future();
    // A move-only handler: the task and the stand-in go with it, no shared copies.
    boost::asio::post(device_executor(dev), [task = std::move(task), stand_in = task_stand_in()]() mutable {
      task();
      stand_in = thread_hold();
    });
    return future;
  }

  /// Every array copy made through this runtime so far, per ordered pair of ends and path.
  transfer_report transfers() const;
  /// Transfer queues, staging chunks and counters (for device arrays).
  const std::shared_ptr<detail::transfer_service>& transfer_service() noexcept { return transfers_; }

private:
  runtime_options options_;
  unsigned cpus_; // the process's affinity when the runtime was made
  topology topology_;
  // Before io_, so that they outlive it: a handler it drops unrun when the runtime goes may hold a
  // thread_hold (run_on_device's stand-in), whose release takes the mutex.
  mutable std::mutex threads_mutex_;      // guards threads_, the counts below and stopped_
  std::atomic<unsigned> thread_count_{0}; // threads_ less those parked
  unsigned initial_threads_ = 0;
  unsigned held_ = 0;      // the threads the hold_threads() holds alive ask for
  unsigned growers_ = 0;   // hold_threads() holds alive
  unsigned narrowed_ = 0;  // narrow_threads() holds alive
  unsigned parked_ = 0;    // park handlers posted and not yet returned
  unsigned relief_ = 0;    // threads let out of park while a running one is held in a step
  unsigned stand_ins_ = 0; // stand-in holds alive: as many threads run beyond the rest
  std::condition_variable unpark_;
  bool stopped_ = false;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<executor_type> work_;
  std::vector<strand_type> device_strands_;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<detail::io_thread_state>> thread_states_; // one per thread in threads_
  void start_threads(unsigned n);                                       // under threads_mutex_
  void release_threads(unsigned n, thread_hold::kind k) noexcept;
  /// On one of this runtime's io threads: a stand-in for a task it posts (run_on_device), held
  /// until the task has run, on whichever thread; elsewhere a hold that does nothing.
  thread_hold task_stand_in();
  thread_hold add_stand_in(thread_hold::kind k); // one more io thread runs while it lives
  /// Under threads_mutex_: parks or lets go io threads so that as many run as the holds ask.
  void settle_threads();
  unsigned threads_wanted() const noexcept; // under threads_mutex_: what the holds ask, stand-ins included
  unsigned running_wanted() const noexcept; // under threads_mutex_: threads_wanted(), at most threads_.size()
  /// An io thread's handler that blocks it while the runtime runs fewer threads than it has.
  void park();
  /// Under threads_mutex_: running threads held in one step for longer than the relief time.
  unsigned held_in_steps() const;
  /// A step held past the relief time returned (io_step): the threads it let out may park again.
  void held_step_returned();
  friend class thread_hold;
  friend class detail::io_step;
  std::shared_ptr<detail::transfer_service> transfers_; // copies in flight share it
};

} // namespace ringpipe
