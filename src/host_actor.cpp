#include "host_actor.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <thread>

namespace ringpipe::detail {

namespace {
using clock = std::chrono::steady_clock;
// After its last progress an actor re-polls at once this long (a message in flight arrives
// within microseconds), then sleeps on a timer, doubling up to the ceiling.
constexpr auto spin_window = std::chrono::microseconds(200);
constexpr auto first_sleep = std::chrono::microseconds(50);
constexpr auto sleep_ceiling = std::chrono::microseconds(1000);
} // namespace

host_actor::host_actor(boost::asio::io_context& io, std::string n, stage_kind k, std::uint32_t batch)
    : name(std::move(n)), kind(k), strand_(boost::asio::make_strand(io)), timer_(strand_),
      batch_(std::max<std::uint32_t>(batch, 1)) {}

void host_actor::add_input(std::shared_ptr<ring_buffer> r) {
  in_size_ = r->slot_size();
  auto in = std::make_unique<input>();
  in->ring = std::move(r);
  inputs.push_back(std::move(in));
}

void host_actor::add_output(std::shared_ptr<ring_buffer> r, ring_kernel_base* consumer) {
  out_size_ = r->slot_size();
  outputs.push_back({std::move(r), consumer});
}

std::uint32_t host_actor::queued() const {
  std::uint32_t n = 0;
  for (const auto& in : inputs)
    n += in->ring->size();
  return n;
}

void host_actor::start() {
  in_buf_.resize(std::max<std::size_t>(in_size_, 1));
  out_buf_.resize(std::max<std::size_t>(std::max(out_size_, in_size_), 1));
  last_progress_ = clock::now();
  boost::asio::post(strand_, [self = shared_from_this()] { self->tick(); });
}

void host_actor::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->timer_.cancel();
    self->tick();
  });
}

bool host_actor::wait_exited(std::chrono::nanoseconds timeout) const {
  return ring_buffer::wait_until([&] { return exited.load(std::memory_order_acquire); }, timeout);
}

void host_actor::leave() { exited.store(true, std::memory_order_release); }

void host_actor::tick() {
  if (exited.load(std::memory_order_relaxed)) return;
  if (stop_.load(std::memory_order_acquire)) return leave();
  std::size_t moved = 0;
  try {
    const auto t0 = clock::now();
    moved = turn();
    if (moved > 0) {
      busy_ns.fetch_add(static_cast<std::uint64_t>((clock::now() - t0).count()), std::memory_order_relaxed);
      batches.fetch_add(1, std::memory_order_relaxed);
      for (auto& out : outputs)
        if (out.consumer != nullptr && out.consumer->mode() != kernel_mode::persistent) out.consumer->notify();
    }
  } catch (...) {
    failed.store(true, std::memory_order_release);
    if (on_failure) on_failure(std::current_exception());
    return leave();
  }
  if (finished.load(std::memory_order_relaxed)) return leave();
  schedule(moved > 0);
}

void host_actor::schedule(bool progress) {
  const auto now = clock::now();
  if (progress || now - last_progress_ < spin_window) {
    if (progress) last_progress_ = now;
    idle_delay_ = std::chrono::microseconds(0);
    boost::asio::post(strand_, [self = shared_from_this()] { self->tick(); });
    return;
  }
  idle_delay_ = idle_delay_.count() == 0 ? first_sleep : std::min(idle_delay_ * 2, sleep_ceiling);
  timer_.expires_after(idle_delay_);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->tick();
  });
}

// Room for one more message on the outputs it would go to.
bool host_actor::has_room() {
  if (outputs.empty()) return true;
  if (policy == fan_out::round_robin) return outputs[next_out_].ring->space() > 0;
  return std::all_of(outputs.begin(), outputs.end(), [](const output& o) { return o.ring->space() > 0; });
}

void host_actor::push(const std::byte* message) {
  if (policy == fan_out::round_robin) {
    (void)outputs[next_out_].ring->try_push_bytes(message); // room was checked
    next_out_ = (next_out_ + 1) % outputs.size();
  } else {
    for (auto& o : outputs)
      (void)o.ring->try_push_bytes(message);
  }
  msgs_out.fetch_add(1, std::memory_order_relaxed);
}

void host_actor::end_stream() {
  for (auto& o : outputs) {
    o.ring->close();
    if (o.consumer != nullptr) o.consumer->notify();
  }
  finished.store(true, std::memory_order_release);
}

// One turn: up to batch_ messages. Returns how many were taken (or generated).
std::size_t host_actor::turn() {
  std::size_t moved = 0;
  if (kind == stage_kind::source) {
    while (moved < batch_ && has_room()) {
      if (!generate(out_buf_.data())) {
        end_stream();
        break;
      }
      push(out_buf_.data());
      ++moved;
    }
    return moved;
  }
  if (!transform && !consume && inputs.size() == 1 && outputs.size() == 1) {
    // A plain copy (staged links): one block through the staging buffer per turn.
    auto& in = *inputs[0];
    auto& out = *outputs[0].ring;
    const auto n = std::min<std::size_t>({in.ring->size(), out.space(), batch_});
    if (n > 0) {
      staging_.resize(n * in_size_);
      const auto got = in.ring->pop_n_bytes(staging_.data(), n);
      (void)out.push_n_bytes(staging_.data(), got); // room was checked; only this actor pushes
      in.popped.fetch_add(got, std::memory_order_relaxed);
      msgs_in.fetch_add(got, std::memory_order_relaxed);
      msgs_out.fetch_add(got, std::memory_order_relaxed);
      moved = got;
    }
  } else {
    moved = move_each();
  }
  if (moved < batch_ && std::all_of(inputs.begin(), inputs.end(), [](const auto& in) { return in->ring->drained(); }))
    end_stream();
  return moved;
}

// Message by message: merging inputs in turn, applying the stage's function, fanning out.
std::size_t host_actor::move_each() {
  std::size_t moved = 0;
  while (moved < batch_ && has_room()) {
    // Merge: take from the inputs in turn; each input's own order is kept.
    bool got = false;
    for (std::size_t k = 0; k < inputs.size() && !got; ++k) {
      auto& in = *inputs[(next_in_ + k) % inputs.size()];
      if (in.ring->try_pop_bytes(in_buf_.data())) {
        got = true;
        in.popped.fetch_add(1, std::memory_order_relaxed);
        next_in_ = (next_in_ + k + 1) % inputs.size();
      }
    }
    if (!got) break;
    msgs_in.fetch_add(1, std::memory_order_relaxed);
    ++moved;
    if (consume) {
      consume(in_buf_.data());
    } else if (transform) {
      if (transform(in_buf_.data(), out_buf_.data())) push(out_buf_.data());
    } else {
      push(in_buf_.data());
    }
  }
  return moved;
}

} // namespace ringpipe::detail
