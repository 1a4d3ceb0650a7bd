#include "stages.hpp"

namespace ringpipe::detail {

// Sources, transforms and sinks move runs of messages: one pop and one push per run, the user's
// function called per message between them; round-robin over several outputs goes one by one.
std::size_t source_stage::turn() {
  if (runs_possible()) {
    const auto room = run_room();
    std::size_t made = 0;
    try {
      for (; made < room; ++made) {
        if (!generate_(out_block_.data() + made * out_size())) {
          push_run(made);
          end_stream();
          return made;
        }
      }
    } catch (...) {
      push_run(made); // what was generated before the throw is delivered
      throw;
    }
    push_run(made);
    return made;
  }
  return std::visit(
      [&](auto& fan) {
        std::size_t moved = 0;
        while (moved < batch() && fan.has_room(outputs_)) {
          if (!generate_(out_buf_.data())) {
            end_stream();
            break;
          }
          push(fan, out_buf_.data());
          ++moved;
        }
        return moved;
      },
      fan_);
}

namespace {
// After a turn that took less than a batch: end the stream once every input has ended.
std::size_t end_if_drained(std::size_t moved, std::uint32_t batch, const merge_inputs& inputs, auto&& end) {
  if (moved < batch && inputs.all_drained()) end();
  return moved;
}
} // namespace

std::size_t transform_stage::turn() {
  std::size_t moved = 0;
  if (runs_possible()) {
    moved = peek_run(run_room());
    std::size_t i = 0, kept = 0;
    try {
      for (; i < moved; ++i)
        if (transform_(in_block_.data() + i * in_size(), out_block_.data() + kept * out_size())) ++kept;
    } catch (...) {
      take_run(i + 1); // the message it threw on is taken (and lost); the rest stay queued
      lost.fetch_add(1, std::memory_order_relaxed);
      push_run(kept);
      throw;
    }
    take_run(moved);
    push_run(kept);
  } else {
    moved = each_message([&](const std::byte* in, auto& fan) {
      if (transform_(in, out_buf_.data())) push(fan, out_buf_.data());
    });
  }
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

std::size_t sink_stage::turn() {
  const auto moved = peek_run(batch());
  std::size_t i = 0;
  try {
    for (; i < moved; ++i)
      consume_(in_block_.data() + i * in_size());
  } catch (...) {
    take_run(i + 1);
    lost.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  take_run(moved);
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

std::size_t mover_stage::turn() {
  std::size_t moved = 0;
  if (inputs_.all().size() == 1 && outputs_.size() == 1) {
    // One ring to one ring (staged links): one block per turn.
    auto& in = *inputs_.all()[0];
    auto& out = *outputs_[0].ring;
    const auto n = std::min<std::size_t>({in.ring->size(), out.space(), batch()});
    if (n > 0) {
      block_.resize(n * in_size());
      const auto got = in.ring->pop_n_bytes(block_.data(), n);
      (void)out.push_n_bytes(block_.data(), got); // room was checked; only this stage pushes
      in.popped.fetch_add(got, std::memory_order_relaxed);
      msgs_in.fetch_add(got, std::memory_order_relaxed);
      msgs_out.fetch_add(got, std::memory_order_relaxed);
      moved = got;
    }
  } else {
    moved = each_message([&](const std::byte* in, auto& fan) { push(fan, in); });
  }
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

} // namespace ringpipe::detail
