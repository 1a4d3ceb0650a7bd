// A parallel_for chunk: how big it is, its devices' work-group size, how its end is reported, and
// small helpers of the scheduler.
#include "chunk_events.hpp"
#include "chunk_sizing.hpp"
#include "parallel_memory.hpp"
#include "parallel_run.hpp"

#include <algorithm>
#include <map>

namespace ringpipe::detail {
namespace {

struct callback_ticket {
  std::shared_ptr<run_signals> signals;
  std::shared_ptr<chunk_memory> memory;       // the command's memory lives until it ended
  std::shared_ptr<transfer_service> commands; // counts it in flight
  std::size_t chunk;
};

void CL_CALLBACK on_event_end(cl_event, cl_int status, void* user) {
  std::unique_ptr<callback_ticket> ticket(static_cast<callback_ticket*>(user));
  // The command ended: its memory is let go before the run hears of it, so that the next run of
  // the kernel finds it free to reuse (parallel_speeds::kept_memory).
  ticket->memory.reset();
  if (ticket->signals) {
    {
      std::lock_guard lock(ticket->signals->mutex);
      ticket->signals->ended.push_back({ticket->chunk, status, std::chrono::steady_clock::now()});
    }
    ticket->signals->wake.notify_all();
  }
  ticket->commands->end_copy([] {});
}

} // namespace

void watch_chunk_event(cl::Event& e, std::size_t chunk, const std::shared_ptr<run_signals>& signals,
                       const std::shared_ptr<chunk_memory>& memory, const std::shared_ptr<transfer_service>& commands) {
  commands->begin_copy();
  auto* ticket = new callback_ticket{signals, memory, commands, chunk};
  if (const cl_int err = clSetEventCallback(e(), CL_COMPLETE, on_event_end, ticket); err != CL_SUCCESS) {
    commands->end_copy([] {});
    delete ticket;
    throw_opencl_error(err, "clSetEventCallback (parallel_for)");
  }
}

std::size_t dynamic_chunk_size(const std::vector<lane_speed>& lanes, std::size_t l, std::size_t n,
                               std::size_t remaining, const dynamic_partition& d, std::size_t window,
                               std::size_t local) {
  std::map<std::string, double> pools; // each pool's fastest alive rate
  bool all_known = true;
  for (const auto& x : lanes)
    if (x.alive) {
      pools[x.pool] = std::max(pools[x.pool], x.rate);
      all_known = all_known && x.known;
    }
  double total = 0;
  for (const auto& p : pools)
    total += p.second;
  const double share = total > 0 ? lanes[l].rate / total : 1.0;
  const double want =
      all_known ? static_cast<double>(remaining) * share / static_cast<double>(std::max<std::size_t>(1, window))
                : static_cast<double>(n) * share / static_cast<double>(std::max<std::size_t>(1, d.first_chunks));
  local = std::max<std::size_t>(1, local);
  const std::size_t size = std::max(std::max<std::size_t>(1, d.min_chunk), static_cast<std::size_t>(want));
  // Whole work-groups while there are any left: the rest (fewer than `local`) ends the run alone.
  const std::size_t whole = remaining / local * local;
  if (whole == 0) return remaining;
  return std::min(whole, std::max(local, size / local * local));
}

std::shared_ptr<run_memory> host_array_memory(parallel_speeds& speeds, const std::vector<parallel_arg>& args,
                                              std::size_t n, const std::string& what) {
  auto& kept = speeds.kept_memory;
  if (kept && kept.use_count() == 1 && kept->fits(speeds.lanes, args, n)) {
    kept->refill(args);
    return kept;
  }
  kept.reset(); // its memory goes before the new run's is allocated
  kept = std::make_shared<run_memory>(speeds.lanes, args, n, what);
  return kept;
}

void speed_record::add(std::size_t items, double seconds, std::size_t window) {
  if (ended_++ == 1) forget(); // the warm-up chunk gives way to the first that measures
  chunks_.push_back({items, seconds});
  items_ += items;
  seconds_ += seconds;
  window = std::max<std::size_t>(1, window);
  // The oldest goes once the newer hold twice its items. At a run's end the guided chunks halve
  // down to min_chunk, so each one holds about as many items as all the newer together: with
  // "as many" instead of "twice", the run's last chunk dropped every big one in a cascade, and the
  // speed came from the five smallest, where a launch's fixed cost is most of a chunk's time.
  while (chunks_.size() > window &&
         (items_ - chunks_.front().items >= 2 * chunks_.front().items || chunks_.size() > 8 * window)) {
    items_ -= chunks_.front().items;
    seconds_ -= chunks_.front().seconds;
    chunks_.pop_front();
  }
}

double speed_record::items_per_second() const { return seconds_ > 0 ? static_cast<double>(items_) / seconds_ : 0.0; }

double median(std::deque<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string failure_text(const std::exception_ptr& e, index_range r) {
  std::string why;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    why = x.what();
  } catch (...) {
    why = "an unknown exception";
  }
  return "chunk " + to_string(r) + ": " + why;
}

std::deque<index_range> aligned_chunks(const std::vector<index_range>& ranges, std::size_t local) {
  std::deque<index_range> out;
  local = std::max<std::size_t>(1, local);
  for (const index_range& r : ranges) {
    const std::size_t body = r.size() / local * local;
    if (body != 0) out.push_back({r.first, r.first + body});
    if (body != r.size()) out.push_back({r.first + body, r.last});
  }
  return out;
}

std::size_t chunk_work_group_size(const cl::Kernel& kernel, const device& dev) {
  std::size_t most = 1;
  clGetKernelWorkGroupInfo(kernel(), dev.cl_device()(), CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, nullptr);
  most = std::min(most, dev.info().type == device_type::cpu ? std::size_t{64} : std::size_t{256});
  std::size_t local = 1;
  while (local * 2 <= most)
    local *= 2;
  return local;
}

} // namespace ringpipe::detail
