#pragma once
// How a host stage takes from several input rings (merge) and hands out to several output rings
// (fan-out policies). Each is a small type; a stage picks its fan-out policy once per turn
// (std::visit), so the per-message calls are direct.

#include <ringpipe/ring.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

namespace ringpipe::detail {

struct stage_input {
  std::shared_ptr<ring_buffer> ring;
  std::atomic<std::uint64_t> popped{0}; ///< what this stage took from the ring
};

struct stage_output {
  std::shared_ptr<ring_buffer> ring;
  std::function<void()> wake_consumer; ///< after a turn that pushed (parked and batched kernels)
};

/// Takes from the inputs in turn; each input's own order is kept.
class merge_inputs {
public:
  void add(std::shared_ptr<ring_buffer> r) {
    auto in = std::make_unique<stage_input>();
    in->ring = std::move(r);
    inputs_.push_back(std::move(in));
  }
  bool pop(std::byte* message) {
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      auto& in = *inputs_[(next_ + k) % inputs_.size()];
      if (in.ring->try_pop_bytes(message)) {
        in.popped.fetch_add(1, std::memory_order_relaxed);
        next_ = (next_ + k + 1) % inputs_.size();
        return true;
      }
    }
    return false;
  }
  /// Up to `max` messages queued in one piece in the next input that has any, in its order, read
  /// in place without taking them: take_run(k) takes the first k.
  std::span<const std::byte> read_run(std::size_t max) {
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      const auto at = (next_ + k) % inputs_.size();
      auto& ring = *inputs_[at]->ring;
      if (const auto run = ring.read_window(max); !run.empty()) {
        peeked_ = at;
        return run;
      }
    }
    return {};
  }
  void take_run(std::size_t n) {
    if (n == 0) return;
    auto& in = *inputs_[peeked_];
    in.ring->drop_n(n);
    in.popped.fetch_add(n, std::memory_order_relaxed);
    next_ = (peeked_ + 1) % inputs_.size();
  }
  /// The ring of the last read_run.
  const ring_buffer* last_read() const noexcept { return inputs_.empty() ? nullptr : inputs_[peeked_]->ring.get(); }
  bool all_drained() const {
    return std::all_of(inputs_.begin(), inputs_.end(), [](const auto& in) { return in->ring->drained(); });
  }
  /// Each input promises its next push's wake (ring_buffer::promise_push_wake): true where all
  /// do (and there is one at least), so the stage may sleep until one comes.
  bool promise_push_wakes() {
    return !inputs_.empty() &&
           std::all_of(inputs_.begin(), inputs_.end(), [](const auto& in) { return in->ring->promise_push_wake(); });
  }
  std::uint32_t queued() const {
    std::uint32_t n = 0;
    for (const auto& in : inputs_)
      n += in->ring->size();
    return n;
  }
  std::vector<std::unique_ptr<stage_input>>& all() noexcept { return inputs_; }
  const std::vector<std::unique_ptr<stage_input>>& all() const noexcept { return inputs_; }

private:
  std::vector<std::unique_ptr<stage_input>> inputs_;
  std::size_t next_ = 0;
  std::size_t peeked_ = 0; // the input of the last read_run
};

/// Every output gets every message.
struct broadcast {
  bool has_room(std::vector<stage_output>& outs) const {
    return std::all_of(outs.begin(), outs.end(), [](const stage_output& o) { return o.ring->space() > 0; });
  }
  void push(std::vector<stage_output>& outs, const std::byte* message) const {
    for (auto& o : outs)
      (void)o.ring->try_push_bytes(message); // room was checked
  }
};

/// Outputs take turns, one message each.
struct round_robin {
  std::size_t next = 0;
  bool has_room(std::vector<stage_output>& outs) const { return outs.empty() || outs[next].ring->space() > 0; }
  void push(std::vector<stage_output>& outs, const std::byte* message) {
    (void)outs[next].ring->try_push_bytes(message); // room was checked
    next = (next + 1) % outs.size();
  }
};

using fan_policy = std::variant<broadcast, round_robin>;

} // namespace ringpipe::detail
