#include <ringpipe/error.hpp>
#include <ringpipe/occupancy.hpp>

#include <algorithm>

namespace ringpipe {

occupancy::slot& occupancy::slot::operator=(slot&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void occupancy::slot::release() noexcept {
  if (pool_ != nullptr) std::exchange(pool_, nullptr)->release(id_);
}

std::uint32_t occupancy::in_use() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::uint32_t>(holders_.size());
}

std::uint32_t occupancy::persistent_in_use() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::uint32_t>(std::count_if(holders_.begin(), holders_.end(),
                                                  [](const holder& h) { return h.mode == kernel_mode::persistent; }));
}

std::uint32_t occupancy::persistent_room() const {
  // Leave one worker for parked and batched kernels, which take turns on it.
  std::lock_guard lock(mutex_);
  const auto held = static_cast<std::uint32_t>(holders_.size()) + 1;
  return budget_ > held ? budget_ - held : 0;
}

std::string occupancy::persistent_names_locked() const {
  std::string names;
  for (const auto& h : holders_) {
    if (h.mode != kernel_mode::persistent) continue;
    names += names.empty() ? "'" : ", '";
    names += h.kernel + "'";
  }
  return names.empty() ? "none" : names;
}

occupancy::slot occupancy::try_acquire(kernel_mode mode, const std::string& kernel) {
  std::lock_guard lock(mutex_);
  const auto persistent = static_cast<std::uint32_t>(std::count_if(
      holders_.begin(), holders_.end(), [](const holder& h) { return h.mode == kernel_mode::persistent; }));
  if (persistent >= budget_) {
    throw error(errc::budget_exceeded,
                "kernel '" + kernel + "' (" + std::string(to_string(mode)) + ") can never run on pool '" + pool_ +
                    "': its " + std::to_string(budget_) + " resident-kernel budget is held by persistent kernels " +
                    persistent_names_locked() + "; use parked or batched mode, or fewer persistent kernels");
  }
  // A persistent kernel reserves its worker at once: a parked or batched kernel that holds one
  // now always leaves, and the device starts the persistent launch then. Transient kernels wait
  // for a free worker.
  if (mode != kernel_mode::persistent && holders_.size() >= budget_) {
    last_refusal_ = std::chrono::steady_clock::now();
    return {};
  }
  const auto id = next_id_++;
  holders_.push_back({id, mode, kernel});
  return slot(this, id);
}

void occupancy::release(std::uint64_t id) noexcept {
  std::lock_guard lock(mutex_);
  std::erase_if(holders_, [id](const holder& h) { return h.id == id; });
}

} // namespace ringpipe

namespace ringpipe {

bool occupancy::contended() const {
  std::lock_guard lock(mutex_);
  return std::chrono::steady_clock::now() - last_refusal_ < std::chrono::milliseconds(5);
}

} // namespace ringpipe
