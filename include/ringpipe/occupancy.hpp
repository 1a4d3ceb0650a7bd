#pragma once
// Occupancy: a running work-group of a ring kernel holds one device worker until it returns
// (PoCL runs each work-group on one of its worker threads, shared by all its CPU devices). A
// kernel launched when every worker is held never starts, so every launch first takes a slot
// from its pool; persistent kernels keep theirs until they stop.

#include <ringpipe/mode.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringpipe {

class occupancy {
public:
  /// A held worker; returns it to the pool when destroyed. Move-only.
  class slot {
  public:
    slot() = default;
    slot(slot&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), id_(other.id_) {}
    slot& operator=(slot&& other) noexcept;
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;
    ~slot() { release(); }
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    void release() noexcept;

  private:
    friend class occupancy;
    slot(occupancy* pool, std::uint64_t id) : pool_(pool), id_(id) {}
    occupancy* pool_ = nullptr;
    std::uint64_t id_ = 0;
  };

  occupancy(std::string pool, std::uint32_t budget) : pool_(std::move(pool)), budget_(budget) {}

  const std::string& pool() const noexcept { return pool_; }
  std::uint32_t budget() const noexcept { return budget_; }
  std::uint32_t in_use() const;
  std::uint32_t persistent_in_use() const;

  /// Takes a slot for a kernel named `kernel` running in `mode`. A persistent kernel always gets
  /// one within the budget; a parked or batched one gets an empty slot while every worker is held. Throws
  /// errc::budget_exceeded when the kernel could never run: a persistent kernel beyond the budget, or any kernel while
  /// persistent ones hold every worker.
  slot try_acquire(kernel_mode mode, const std::string& kernel);

  /// Whether a kernel was refused a worker in the last few milliseconds: parked kernels that hold
  /// one then leave as soon as they run out of work, instead of after their full idle budget.
  bool contended() const;

  /// Whether a kernel may go persistent now and still leave one worker free for parked and
  /// batched kernels (used to choose a mode automatically).
  bool persistent_available() const { return persistent_room() > 0; }
  /// How many more kernels may go persistent now and still leave one worker free (the planner
  /// counts a pipeline's kernels against it).
  std::uint32_t persistent_room() const;

private:
  struct holder {
    std::uint64_t id;
    kernel_mode mode;
    std::string kernel;
  };
  void release(std::uint64_t id) noexcept;
  std::string persistent_names_locked() const;

  std::string pool_;
  std::uint32_t budget_;
  mutable std::mutex mutex_;
  std::vector<holder> holders_;
  std::uint64_t next_id_ = 1;
  std::chrono::steady_clock::time_point last_refusal_{};
};

} // namespace ringpipe
