// parallel_for's scheduler: the calling thread hands chunks to devices (keeping `in_flight` queued
// on each), learns each device's speed from its ended chunks (event callbacks wake it), hands a
// failed device's chunks to the others, and copies each ended chunk's outputs into place.
#include "chunk_events.hpp"
#include "chunk_sizing.hpp"
#include "parallel_run.hpp"
#include "split_memory.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

namespace ringpipe::detail {

namespace {

using clock_type = std::chrono::steady_clock;

struct chunk_state {
  std::size_t lane = 0;
  index_range range;
  clock_type::time_point enqueued;
  std::size_t events_left = 0;
  cl_int worst = CL_COMPLETE;
  bool abandoned = false; // its enqueue failed: it was handed back at once
  bool measuring = false; // handed out while a device's speed was not known
};

struct lane_state {
  const device* dev = nullptr;
  cl::CommandQueue queue;
  cl::Kernel kernel;
  std::string pool;      // lanes of one pool run on the same cores
  std::size_t local = 1; // work-group size: chunks are multiples of it (one compiled variant)
  std::size_t in_flight = 0;
  std::string failure;
  clock_type::time_point free_at;
  std::deque<index_range> own;  // static partitions: its ranges not yet handed out
  std::vector<cl::Event> setup; // whole-input writes, ended with its first chunk
  parallel_device_stats stats;
  bool remeasured = false; // dynamic: its first chunk measures it anew (idle_remeasure.hpp)
  bool alive() const { return failure.empty(); }
};

class scheduler {
public:
  scheduler(parallel_speeds& speeds, const parallel_for_options& options, const kernel_source& source, std::size_t n,
            const std::vector<parallel_arg>& args)
      : speeds_(speeds), options_(options), source_(source), n_(n), args_(args),
        split_run_(runs_over_split_arrays(args)),
        partition_(split_run_ ? partitioner(block_partition{}) : options.partition),
        signals_(std::make_shared<run_signals>()), start_(clock_type::now()), deadline_(start_ + options.timeout) {}

  parallel_for_report run() {
    set_up();
    while (done_ < n_) {
      hand_out();
      if (std::none_of(lanes_.begin(), lanes_.end(), [](const lane_state& l) { return l.alive() || l.in_flight; }))
        fail_run("every device failed, ");
      const bool idle =
          std::none_of(lanes_.begin(), lanes_.end(), [](const lane_state& l) { return l.in_flight != 0; });
      // Chunks handed back that no device left reaches: their data lives on failed devices.
      if (idle && !returned_.empty()) fail_run(memory_->where(returned_.front()) + " is reached by no device left; ");
      if (idle)
        throw error(errc::invalid_argument, what() + ": " + std::to_string(n_ - done_) +
                                                " indices left that no device can take (a scheduler fault)");
      wait_and_complete();
    }
    return report();
  }

private:
  std::string what() const { return "parallel_for '" + options_.name + "' (kernel '" + source_.kernel + "')"; }
  /// Fills every lane's window, and every pool's (lanes whose devices run on the same cores),
  /// again while a lane failing handed chunks back.
  void hand_out() {
    for (bool again = true; again;) {
      const auto dead_before =
          std::count_if(lanes_.begin(), lanes_.end(), [](const lane_state& s) { return !s.alive(); });
      for (std::size_t l : hand_out_order())
        while (lanes_[l].alive() && lanes_[l].in_flight < window() && pool_in_flight(l) < pool_window() &&
               may_take(l) && issue(l)) {
        }
      again = !returned_.empty() &&
              std::count_if(lanes_.begin(), lanes_.end(), [](const lane_state& s) { return !s.alive(); }) > dead_before;
    }
  }

  /// Static partitions: the lanes with the fewest chunks queued first, so lanes of one pool take
  /// its slots in turn. Dynamic: a lane not yet measured first (two chunks, to learn its speed),
  /// then the fastest: lanes of one pool share its cores, so the pool runs fastest when its
  /// fastest device runs everything; the others then take chunks only where they are faster.
  std::vector<std::size_t> hand_out_order() const {
    std::vector<std::size_t> order(lanes_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (!std::holds_alternative<dynamic_partition>(partition_)) {
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return lanes_[a].in_flight < lanes_[b].in_flight; });
      return order;
    }
    std::vector<std::pair<int, double>> key(lanes_.size());
    for (std::size_t l = 0; l < lanes_.size(); ++l) {
      // 0: to be measured; 1: measured, by speed; 2: waiting for a measuring chunk to end.
      key[l] = {known(l) ? 1 : (lanes_[l].in_flight == 0 ? 0 : 2), -rate(l)};
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
    return order;
  }

  /// Chunks queued on the lanes of lane `l`'s pool: more than the window there only makes them
  /// compete for the same cores.
  std::size_t pool_in_flight(std::size_t l) const {
    std::size_t sum = 0;
    for (const auto& s : lanes_)
      if (s.pool == lanes_[l].pool) sum += s.in_flight;
    return sum;
  }
  /// Whether lane `l`'s speed is known: from two chunks, so that one slow first chunk (a compile,
  /// a page-in) does not mark it slow for good (speed_record counts it only until the second).
  bool known(std::size_t l) const {
    return speed_of(l).ended() >= 2 && !(lanes_[l].remeasured && lanes_[l].stats.chunks == 0);
  }
  const speed_record& speed_of(std::size_t l) const { return speeds_.speed[lanes_[l].dev->index()]; }
  bool all_known() const {
    for (std::size_t k = 0; k < lanes_.size(); ++k)
      if (lanes_[k].alive() && !known(k)) return false;
    return true;
  }
  /// Dynamic partitions: a lane whose speed is not known takes its measuring chunks one at a time.
  /// While a pool has such a lane, it runs one chunk at a time: PoCL compiling one kernel for two of
  /// its devices at once leaked LLVM state (seen under LeakSanitizer), and a chunk beside another
  /// device's on the same cores measures that device's load, not its own speed (PoCL's chunks of 128
  /// items took 140 ms beside llvmpipe's, 0.2 ms alone: it was taken for the slow one).
  bool may_take(std::size_t l) const {
    if (!std::holds_alternative<dynamic_partition>(partition_)) return true;
    bool pool_measuring = !known(l);
    for (std::size_t k = 0; k < lanes_.size(); ++k)
      pool_measuring |= lanes_[k].pool == lanes_[l].pool && lanes_[k].alive() && !known(k);
    if (!pool_measuring) return true;
    return pool_in_flight(l) == 0;
  }
  /// Chunks at once on the lanes of one pool. Over split arrays each piece must run on its own
  /// device, and devices sharing cores ran slower side by side than one after the other (two PoCL
  /// pieces of heat_diffusion: 530 us a step side by side, 341 us in turn): one at a time.
  std::size_t pool_window() const { return split_run_ ? 1 : window(); }
  std::size_t window() const {
    const auto* d = std::get_if<dynamic_partition>(&partition_);
    return d ? std::max<std::size_t>(1, d->in_flight) : 2;
  }

  void set_up() {
    if (split_run_)
      memory_ = std::make_shared<split_memory>(speeds_.lanes, args_);
    else
      memory_ = host_array_memory(speeds_, args_, n_, what());
    std::vector<std::vector<index_range>> own = memory_->owned();
    if (own.empty() && !std::holds_alternative<dynamic_partition>(partition_))
      own = split(partition_, n_, speeds_.lanes.size());
    for (std::size_t l = 0; l < speeds_.lanes.size(); ++l) {
      lane_state s;
      s.dev = speeds_.lanes[l];
      s.stats.device = s.dev->label();
      // Made once per parallel_kernel: a queue on rusticl took milliseconds, more than a run's work.
      if (speeds_.queues.size() <= l) {
        speeds_.queues.push_back(cl_call("clCreateCommandQueue (parallel_for)",
                                         [&] { return cl::CommandQueue(s.dev->context(), s.dev->cl_device()); }));
        speeds_.kernels.push_back(cl_call("clCreateKernel (parallel_for)",
                                          [&] { return cl::Kernel(speeds_.programs[l], source_.kernel.c_str()); }));
      }
      s.queue = speeds_.queues[l];
      s.kernel = speeds_.kernels[l];
      s.local = chunk_work_group_size(s.kernel, *s.dev);
      s.pool = pool_of(*s.dev);
      s.stats.pool = s.pool;
      memory_->bind(l, s.kernel, args_);
      memory_->write_whole(l, s.queue, s.setup);
      for (auto& e : s.setup)
        watch_chunk_event(e, 0, nullptr, memory_, speeds_.commands); // a lane may run no chunk
      if (!own.empty()) s.own = aligned_chunks(own[l], s.local);
      s.free_at = start_;
      lanes_.push_back(std::move(s));
    }
    if (std::holds_alternative<dynamic_partition>(partition_))
      for (std::size_t l : speeds_.remeasure.choose(lane_speeds()))
        lanes_[l].remeasured = true;
  }

  /// One pool: CPU devices sharing the host's cores (parallel_kernel decided), else PoCL's workers.
  std::string pool_of(const device& d) const {
    if (d.info().type == device_type::cpu && options_.cpu_devices_share_cores.value_or(true)) return "host cores";
    return d.info().budget_pool.empty() ? "device " + std::to_string(d.index()) : d.info().budget_pool;
  }

  /// Items per second of lane `l`: its recent chunks' (speed_record), or its compute units scaled
  /// by the lanes that were measured.
  double rate(std::size_t l) const {
    if (const auto& mine = speed_of(l); mine.chunks() != 0) return mine.items_per_second();
    std::deque<double> ratios;
    for (std::size_t k = 0; k < lanes_.size(); ++k)
      if (const auto& m = speed_of(k); m.chunks() != 0)
        ratios.push_back(m.items_per_second() / std::max(1u, lanes_[k].dev->info().compute_units));
    const double cu = std::max(1u, lanes_[l].dev->info().compute_units);
    return ratios.empty() ? cu : cu * median(ratios);
  }

  std::vector<lane_speed> lane_speeds() const {
    std::vector<lane_speed> speeds;
    for (std::size_t k = 0; k < lanes_.size(); ++k)
      speeds.push_back({lanes_[k].pool, rate(k), known(k), lanes_[k].alive(), lanes_[k].dev->index()});
    return speeds;
  }
  std::size_t dynamic_chunk(std::size_t l, const dynamic_partition& d) const {
    return dynamic_chunk_size(lane_speeds(), l, n_, n_ - next_, d, window(), lanes_[l].local);
  }

  bool next_range(std::size_t l, index_range& r) {
    for (auto at = returned_.begin(); at != returned_.end(); ++at)
      if (memory_->reaches(l, *at)) {
        r = *at;
        returned_.erase(at);
        return true;
      }
    if (const auto* d = std::get_if<dynamic_partition>(&partition_)) {
      if (next_ == n_) return false;
      r = {next_, next_ + dynamic_chunk(l, *d)};
      next_ = r.last;
      return true;
    }
    if (lanes_[l].own.empty()) return false;
    r = lanes_[l].own.front();
    lanes_[l].own.pop_front();
    return true;
  }

  /// Hands lane `l` its next chunk; false when there is none for it.
  bool issue(std::size_t l) {
    lane_state& s = lanes_[l];
    index_range r;
    if (!next_range(l, r)) return false;
    const std::size_t id = chunks_.size();
    chunk_state started;
    started.lane = l, started.range = r, started.enqueued = clock_type::now();
    started.measuring = std::holds_alternative<dynamic_partition>(partition_) && !all_known();
    chunks_.push_back(started);
    try {
      if (options_.before_chunk) options_.before_chunk(*s.dev, r);
      std::vector<cl::Event> events = std::move(s.setup);
      s.setup.clear();
      memory_->write_chunk(l, s.queue, r, events);
      const std::size_t offset = memory_->bind_chunk(l, s.kernel, args_, r);
      // The lane's work-group size, said: left to the implementation, PoCL picked one per chunk
      // size and compiled each (100-140 ms a size with a cold cache, inside the chunk's time).
      const cl::NDRange group = r.size() % s.local == 0 ? cl::NDRange(s.local) : cl::NullRange;
      cl::Event ran;
      cl_call("clEnqueueNDRangeKernel (parallel_for)", [&] {
        s.queue.enqueueNDRangeKernel(s.kernel, cl::NDRange(offset), cl::NDRange(r.size()), group, nullptr, &ran);
      });
      events.push_back(std::move(ran));
      memory_->read_chunk(l, s.queue, r, events);
      s.queue.flush();
      chunks_[id].events_left = events.size();
      for (auto& e : events)
        watch_chunk_event(e, id, signals_, memory_, speeds_.commands);
      ++s.in_flight;
    } catch (...) {
      chunks_[id].abandoned = true;
      returned_.push_front(r);
      fail_lane(l, failure_text(std::current_exception(), r));
      return false;
    }
    return true;
  }

  void fail_lane(std::size_t l, const std::string& why) {
    lane_state& s = lanes_[l];
    if (!s.alive()) return;
    s.failure = why;
    s.stats.failure = why;
    for (const auto& r : s.own) // a static lane's ranges go to the others
      returned_.push_back(r);
    s.own.clear();
  }

  void wait_and_complete() {
    std::vector<ended_event> ended;
    {
      std::unique_lock lock(signals_->mutex);
      if (!signals_->wake.wait_until(lock, deadline_, [&] { return !signals_->ended.empty(); })) late();
      ended.swap(signals_->ended);
    }
    for (const auto& e : ended)
      end_event(e);
  }

  void end_event(const ended_event& e) {
    chunk_state& c = chunks_[e.chunk];
    if (c.abandoned) return;
    c.worst = std::min(c.worst, e.status);
    if (--c.events_left != 0) return;
    lane_state& s = lanes_[c.lane];
    --s.in_flight;
    // From when the device could start it (its previous chunk ended) to its end. Not the
    // implementations' profiling: rusticl's llvmpipe reports command times near zero.
    const double seconds = std::chrono::duration<double>(e.at - std::max(c.enqueued, s.free_at)).count();
    s.free_at = e.at;
    chunk_record rec{c.lane, c.range, e.chunk, seconds, c.worst < 0, c.measuring};
    records_.push_back(rec);
    if (c.worst < 0) {
      returned_.push_back(c.range);
      fail_lane(c.lane, "chunk " + to_string(c.range) + ": a command failed with " + opencl_error_name(c.worst));
      return;
    }
    memory_->deliver(c.lane, c.range, args_);
    done_ += c.range.size();
    s.stats.items += c.range.size();
    ++s.stats.chunks;
    s.stats.busy_seconds += seconds;
    if (seconds > 0) {
      const auto* d = std::get_if<dynamic_partition>(&partition_);
      auto& record = speeds_.speed[s.dev->index()];
      if (s.remeasured && s.stats.chunks == 1) record.forget(); // measured anew from this chunk
      record.add(c.range.size(), seconds, d ? d->speed_window : 5);
    }
  }

  [[noreturn]] void late() const {
    std::string busy;
    for (const auto& c : chunks_)
      if (!c.abandoned && c.events_left != 0)
        busy += (busy.empty() ? "" : ", ") + lanes_[c.lane].dev->label() + " " + to_string(c.range);
    throw error(errc::timeout, what() + ": not done after " + std::to_string(options_.timeout.count()) + " ms (" +
                                   std::to_string(done_) + " of " + std::to_string(n_) + " indices done" +
                                   (busy.empty() ? "" : "; still running: " + busy) + ")");
  }

  /// `how` the run cannot go on, then what is not done and why each failed device failed.
  [[noreturn]] void fail_run(const std::string& how) const {
    std::string why;
    for (const auto& s : lanes_)
      if (!s.alive()) why += "\n  " + s.dev->label() + ": " + s.failure;
    throw error(errc::device_failed, what() + ": " + how + std::to_string(n_ - done_) + " of " + std::to_string(n_) +
                                         " indices not done:" + why);
  }

  parallel_for_report report() {
    parallel_for_report r;
    r.name = options_.name;
    r.partition = describe(partition_);
    for (const auto& a : args_)
      if (a.how == parallel_arg::kind::split) {
        r.partition = "by pieces of " + a.split->describe();
        break;
      }
    r.items = n_;
    r.seconds = std::chrono::duration<double>(clock_type::now() - start_).count();
    for (const auto& s : lanes_) {
      r.devices.push_back(s.stats);
      r.devices.back().items_per_second = speeds_.speed[s.dev->index()].items_per_second();
      if (std::holds_alternative<dynamic_partition>(partition_))
        speeds_.remeasure.ended(s.dev->index(), s.stats.chunks, s.remeasured);
    }
    r.chunks = std::move(records_);
    return r;
  }

  parallel_speeds& speeds_;
  const parallel_for_options& options_;
  const kernel_source& source_;
  std::size_t n_;
  const std::vector<parallel_arg>& args_;
  bool split_run_;        // over split arrays
  partitioner partition_; // a run over split arrays: static, by the arrays' pieces
  std::shared_ptr<run_signals> signals_;
  std::shared_ptr<chunk_memory> memory_;
  clock_type::time_point start_, deadline_;
  std::vector<lane_state> lanes_;
  std::vector<chunk_state> chunks_;
  std::vector<chunk_record> records_;
  std::deque<index_range> returned_;
  std::size_t next_ = 0, done_ = 0;
};

} // namespace

parallel_for_report run_parallel(parallel_speeds& speeds, const parallel_for_options& options,
                                 const kernel_source& source, std::size_t n, const std::vector<parallel_arg>& args) {
  return scheduler(speeds, options, source, n, args).run();
}

} // namespace ringpipe::detail
