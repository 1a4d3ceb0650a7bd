#include "transfer_service.hpp"

#include "text.hpp"

#include <ringpipe/detail/json.hpp>

#include <cstdio>

namespace ringpipe::detail {

staging_pool::~staging_pool() {
  for (auto& chunk : free)
    chunk.unmap(map_queue);
  if (map_queue() != nullptr) clFinish(map_queue());
}

staging_chunk::~staging_chunk() {
  const std::lock_guard lock(pool_->mutex);
  pool_->free.push_back(memory_);
}

transfer_service::transfer_service(const topology& devices, boost::asio::io_context::executor_type executor)
    : executor_(std::move(executor)), queues_(devices.size()) {}

transfer_service::~transfer_service() = default;

cl::CommandQueue& transfer_service::queue(const device& dev) {
  const std::lock_guard lock(mutex_);
  auto& q = queues_.at(dev.index());
  if (!q)
    q = cl_call("clCreateCommandQueue (transfer queue)",
                [&] { return cl::CommandQueue(dev.context(), dev.cl_device()); });
  return *q;
}

std::shared_ptr<staging_chunk> transfer_service::borrow_chunk(const device& dev) {
  std::shared_ptr<staging_pool> pool;
  {
    const std::lock_guard lock(mutex_);
    auto& slot = pools_[dev.context()()];
    if (!slot) {
      slot = std::make_shared<staging_pool>();
      slot->context = dev.context();
      slot->map_queue =
          cl_call("clCreateCommandQueue (staging)", [&] { return cl::CommandQueue(dev.context(), dev.cl_device()); });
    }
    pool = slot;
  }
  const std::lock_guard lock(pool->mutex);
  if (pool->free.empty())
    pool->free.push_back(cl_call("clCreateBuffer (pinned staging chunk)",
                                 [&] { return pinned_memory(pool->context, pool->map_queue, chunk_bytes); }));
  auto memory = pool->free.back();
  pool->free.pop_back();
  return std::shared_ptr<staging_chunk>(new staging_chunk(pool, memory));
}

void transfer_service::count(const device* from, const device* to, copy_path path, std::uint64_t bytes,
                             std::chrono::steady_clock::duration took, bool failed) {
  const auto index = [](const device* d) {
    return d == nullptr ? std::ptrdiff_t{-1} : static_cast<std::ptrdiff_t>(d->index());
  };
  const auto label = [](const device* d) { return d == nullptr ? std::string("host") : d->label(); };
  const std::lock_guard lock(mutex_);
  const auto [it, fresh] = row_of_.try_emplace({index(from), index(to), path}, report_.pairs.size());
  if (fresh) report_.pairs.push_back({label(from), label(to), path});
  auto& row = report_.pairs[it->second];
  ++row.copies;
  row.bytes += bytes;
  row.failed += failed ? 1 : 0;
  row.seconds += std::chrono::duration<double>(took).count();
}

transfer_report transfer_service::report() const {
  const std::lock_guard lock(mutex_);
  return report_;
}

void transfer_service::begin_copy() {
  const std::lock_guard lock(mutex_);
  if (closed_) throw error(errc::cancelled, "array copy: the runtime is shutting down");
  ++in_flight_;
}

void transfer_service::end_copy(const std::function<void()>& deliver) {
  const std::lock_guard lock(mutex_);
  if (!closed_) deliver();
  if (--in_flight_ == 0) idle_.notify_all();
}

void transfer_service::post(std::function<void()> step) {
  const std::lock_guard lock(mutex_);
  if (!closed_) boost::asio::post(executor_, std::move(step));
}

bool transfer_service::drain_and_close(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  const bool drained = idle_.wait_for(lock, limit, [&] { return in_flight_ == 0; });
  closed_ = true;
  return drained;
}

} // namespace ringpipe::detail

namespace ringpipe {

const transfer_stats* transfer_report::find(std::string_view from, std::string_view to, copy_path path) const noexcept {
  for (const auto& p : pairs)
    if (p.from == from && p.to == to && p.path == path) return &p;
  return nullptr;
}

std::uint64_t transfer_report::total_copies() const noexcept {
  std::uint64_t n = 0;
  for (const auto& p : pairs)
    n += p.copies;
  return n;
}

std::uint64_t transfer_report::total_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& p : pairs)
    n += p.bytes;
  return n;
}

std::string transfer_report::table() const {
  std::string t;
  char line[256];
  std::snprintf(line, sizeof line, "%-36s %-36s %-7s %7s %12s %6s %7s\n", "from", "to", "path", "copies", "bytes",
                "failed", "GB/s");
  t += line;
  for (const auto& p : pairs) {
    char rate[16] = "-"; // untimed (a pipeline's staged batches)
    if (p.seconds > 0) std::snprintf(rate, sizeof rate, "%.2f", static_cast<double>(p.bytes) / p.seconds / 1e9);
    std::snprintf(line, sizeof line, "%-36.36s %-36.36s %-7s %7llu %12llu %6llu %7s\n",
                  detail::short_label(p.from).c_str(), detail::short_label(p.to).c_str(),
                  std::string(to_string(p.path)).c_str(), static_cast<unsigned long long>(p.copies),
                  static_cast<unsigned long long>(p.bytes), static_cast<unsigned long long>(p.failed), rate);
    t += line;
  }
  return t;
}

std::string transfer_report::json() const {
  using detail::json_number;
  using detail::json_string;
  std::string j = "[";
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    j += (i ? ", " : "") + std::string("{\"from\": ") + json_string(p.from) + ", \"to\": " + json_string(p.to) +
         ", \"path\": " + json_string(to_string(p.path)) + ", \"copies\": " + std::to_string(p.copies) +
         ", \"bytes\": " + std::to_string(p.bytes) + ", \"failed\": " + std::to_string(p.failed) +
         ", \"seconds\": " + json_number(p.seconds) + "}";
  }
  return j + "]";
}

} // namespace ringpipe
