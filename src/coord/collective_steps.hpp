#pragma once
// One collective call: its deadline, its failure naming the device, and the two kinds of step the
// algorithms (collective.cpp) are made of: copies between arrays, and combines (acc op= sources)
// run by each device (collective_device.cpp) or, over shared memory the host reaches, by the
// calling thread (collective_host.cpp). A step returns when every part of it has ended.

#include <ringpipe/collective.hpp>
#include <ringpipe/detail/blocked_wait.hpp>

#include <chrono>
#include <future>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace ringpipe::detail {

/// acc op= each of `sources`, in order (all the size of acc).
struct combine_task {
  array_bytes acc;
  std::vector<array_bytes> sources;
};

class collective_run {
public:
  collective_run(std::string_view verb, const collective_options& options);
  /// "all_reduce 'grads'": how its errors begin.
  const std::string& what() const noexcept { return what_; }
  const collective_options& options() const noexcept { return options_; }

  /// Copies each pair's first array into its second, all at once.
  void copies(std::string_view step, const std::vector<std::pair<array_bytes, array_bytes>>& pairs);
  /// Runs each task on its accumulator's device.
  void combine(std::string_view step, const std::vector<combine_task>& tasks, const element_op& op);

  /// Calls options().before_step for `d`; a throw becomes d's failure.
  void before(const device& d, std::string_view step) const;
  std::chrono::steady_clock::time_point deadline() const noexcept { return deadline_; }
  /// errc::timeout: `who` did not finish `step` in time.
  [[noreturn]] void late(std::string_view step, const std::string& who) const;
  /// errc::device_failed (or the failure's own code), naming `d` and the step.
  [[noreturn]] void failed(std::string_view step, const device& d, const std::exception_ptr& e) const;
  /// The failure failed() would throw, to rethrow later.
  std::exception_ptr named(std::string_view step, const device& d, const std::exception_ptr& e) const;
  /// Waits until the deadline for a command on `d` to end (`ending` from ending_of()); throws as
  /// late() or failed() when it did not end in time or ended with an error, naming `command`
  /// ("its kernel", "mapping array 'x'").
  void wait_ended(std::string_view step, std::future<cl_int>& ending, const device& d,
                  const std::string& command) const;

private:
  std::string what_;
  const collective_options& options_;
  std::chrono::steady_clock::time_point deadline_;
  // Called from a host function on one of the runtime's io threads, the run's copies step on the
  // runtime's threads: a stand-in runs them while the caller waits (for the whole run).
  detail::blocked_wait blocked_;
};

/// The status an OpenCL command ended with, set by the OpenCL runtime's callback: a waiter sleeps
/// until then instead of polling (a poll's sleep lasted about 60 us here, longer than a 1 MiB pass).
std::future<cl_int> ending_of(const cl::Event& e);

/// Whether the calling thread may combine these arrays in place: all in shared memory of CPU
/// devices, and the operation has a host form.
bool host_reaches(const std::vector<array_bytes>& arrays, const element_op& op);
/// Whether every array lies in shared memory of one context: each device reads the others in place.
bool one_shared_context(const std::vector<array_bytes>& arrays);

/// The calling thread combines `inputs` (all one size) and writes the result to every output and
/// to `host_out` if not null. Inputs in shared memory are read in place, the others copied to the
/// host first (all at once); outputs likewise. The path for links through host memory: the bytes
/// pass through the host anyway, so it combines them there (collective_host.cpp).
void host_pass(collective_run& run, std::string_view step, const std::vector<array_bytes>& inputs,
               const std::vector<array_bytes>& outputs, void* host_out, const element_op& op);

/// One device's part of a shared pass: every output = op over the inputs (all one size).
struct pass_part {
  const device* on = nullptr;
  std::vector<array_bytes> inputs;
  std::vector<array_bytes> outputs;
};
/// Each part runs as one kernel on its device, reading its peers' memory in place; one
/// synchronisation for the whole pass (collective_shared.cpp).
void shared_pass(collective_run& run, std::string_view step, const std::vector<pass_part>& parts, const element_op& op);

/// Keeps `what` (arrays a kernel that never ended may still touch) allocated for good: copied into
/// a leaked holder, so their memory is not freed under the kernel.
template <class... T> void leave_allocated(const T&... what) noexcept {
  try {
    (void)new std::tuple<T...>(what...);
  } catch (...) { // out of memory: nothing more can be done
  }
}

/// Work-items of a combine kernel each take this many consecutive elements on a CPU device (a loop
/// the compiler vectorises) and one elsewhere.
std::size_t elements_per_item(const device& d);

/// One task's combines on its accumulator's device, a source per round. A round is three calls,
/// each made for every device before the next: fetch (starts copying the source in where the
/// device cannot read it in place), launch (the combine kernel, once the copy is in), finish
/// (waits for the kernel). Waits end at the run's deadline and throw naming the device.
class device_combine {
public:
  device_combine(collective_run& run, std::string_view step, const combine_task& task, const element_op& op);
  ~device_combine();
  bool done() const noexcept { return next_ >= task_.sources.size(); }
  void fetch();
  void launch();
  void finish();
  const device& on() const { return task_.acc.dev(); }

private:
  const array_bytes& source() const { return task_.sources[next_]; }
  collective_run& run_;
  std::string step_;
  const combine_task& task_;
  const element_op& op_;
  std::size_t next_ = 0;
  cl::Kernel kernel_;
  array_bytes scratch_;
  std::shared_ptr<std::promise<void>> fetched_;
  std::future<void> fetching_;
  cl::Event running_;
};

} // namespace ringpipe::detail
