#pragma once
// A load balancer over devices: where the next piece of work should go (the device that would
// finish it first, given what it already holds and how fast it has been), and, when the devices'
// queues drift apart, a plan to move work between them. Load is kept in one place, in atomics, so
// any thread may select and report at once; speeds come from a median of recent completions.
//
//   ringpipe::load_balancer lb(rt.devices());                 // speeds from the probe at first
//   auto d = lb.select_device(cost);                          // counts `cost` on d
//   ... run it on d ...
//   lb.report_completion(d, took, cost);                      // d's load falls, its speed is learnt
//   for (auto move : lb.rebalance_plan()) ...                 // when max/mean drain time > 1.2

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ringpipe {

class topology;

struct balancer_options {
  double rebalance_above = 1.2; ///< rebalance_plan() plans moves when imbalance() exceeds this
  std::size_t speed_window = 9; ///< completions the median speed is taken over
};

/// Move `items` queued items (about `load` of cost) from device `from` to device `to`.
struct rebalance_move {
  std::size_t from = 0;
  std::size_t to = 0;
  std::size_t items = 0;
  double load = 0;
};

/// One device's state in a balance_report.
struct device_load {
  std::string name;
  std::size_t items = 0;    ///< items selected or assigned and not yet completed
  double load = 0;          ///< their cost
  double speed = 0;         ///< cost per second: the median of recent completions, or the prior
  bool measured = false;    ///< speed is from completions (false: the prior)
  double drain_seconds = 0; ///< load / speed
  std::size_t completed = 0;
};

struct balance_report {
  std::vector<device_load> devices;
  double imbalance = 1; ///< max / mean drain time (1: even; 1 when nothing is queued)
  std::string table() const;
};

class load_balancer {
public:
  /// One device per entry of `capability` (relative speeds before anything is measured, > 0),
  /// named in reports by `names` (default "device 0", ...).
  explicit load_balancer(std::vector<double> capability, std::vector<std::string> names = {},
                         balancer_options options = {});
  /// The devices of a topology, capability from their compute units.
  explicit load_balancer(const topology& devices, balancer_options options = {});
  ~load_balancer();
  load_balancer(const load_balancer&) = delete;
  load_balancer& operator=(const load_balancer&) = delete;

  std::size_t size() const noexcept { return slots_.size(); }

  /// The device that would drain first with `cost` more: least (load + cost) / speed; counts the
  /// item on it. Safe from any thread.
  std::size_t select_device(double cost = 1);
  /// Counts `items` items of `cost` in all on `device` without choosing (static dealing, moves).
  void assign(std::size_t device, double cost, std::size_t items = 1);
  /// `items` items of `cost` in all on `device` ended after `took` (their time together, e.g. a
  /// window in which a streaming device was busy): its load falls and, where `took` > 0, its
  /// speed is learnt from cost / took.
  void report_completion(std::size_t device, std::chrono::nanoseconds took, double cost = 1, std::size_t items = 1);
  /// A speed sample alone: `device` got through `cost` in `took` (load is not changed).
  void learn_speed(std::size_t device, std::chrono::nanoseconds took, double cost);
  /// Accounts a move the caller made: the items and their load change devices.
  void apply(const rebalance_move& m);

  double load(std::size_t device) const;
  std::size_t items(std::size_t device) const;
  double speed(std::size_t device) const;
  /// max / mean of the devices' drain times (load / speed).
  double imbalance() const;
  /// Moves that bring every device to the mean drain time, from the most to the least loaded,
  /// when imbalance() exceeds balancer_options::rebalance_above; empty otherwise.
  std::vector<rebalance_move> rebalance_plan() const;
  balance_report report() const;

private:
  struct slot;
  slot& at(std::size_t device) const;
  void add(std::size_t device, double cost, long long items);

  balancer_options options_;
  std::vector<std::unique_ptr<slot>> slots_;
  /// The median of measured speed / capability over the devices measured (0: none yet), kept
  /// by learn_speed so that speed() of a device not measured yet reads it without allocating.
  std::atomic<double> prior_ratio_{0};
};

} // namespace ringpipe
