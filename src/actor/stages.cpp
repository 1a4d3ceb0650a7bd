#include "stages.hpp"

namespace ringpipe::detail {

// Sources, transforms and sinks move runs of messages: one pop, one call of the user's function
// (through its adapter, which calls it per message or once per batch) and one push per run;
// round-robin over several outputs goes one message at a time.
std::size_t source_stage::turn() {
  if (runs_possible()) {
    const auto room = run_room();
    if (room == 0) return 0; // a batch source never sees an empty span
    run_progress p;
    try {
      generate_(out_block_.data(), room, p);
    } catch (...) {
      push_run(p.made); // what was generated before the throw is delivered
      throw;
    }
    push_run(p.made);
    if (p.ended) end_stream();
    return p.made;
  }
  return std::visit(
      [&](auto& fan) {
        std::size_t moved = 0;
        while (moved < batch() && fan.has_room(outputs_)) {
          run_progress p;
          generate_(out_buf_.data(), 1, p);
          if (p.made == 1) push(fan, out_buf_.data());
          moved += p.made;
          if (p.ended) {
            end_stream();
            break;
          }
          if (p.made == 0) break; // a batch source with nothing yet
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
    run_progress p;
    try {
      if (moved > 0) transform_(in_block_.data(), moved, out_block_.data(), p);
    } catch (...) {
      lose_at_throw(p);
      push_run(p.made);
      throw;
    }
    take_run(moved);
    push_run(p.made);
  } else {
    moved = each_message([&](const std::byte* in, auto& fan) {
      run_progress p;
      transform_(in, 1, out_buf_.data(), p);
      if (p.made == 1) push(fan, out_buf_.data());
    });
  }
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

std::size_t sink_stage::turn() {
  const auto moved = peek_run(batch());
  run_progress p;
  try {
    if (moved > 0) consume_(in_block_.data(), moved, p);
  } catch (...) {
    lose_at_throw(p);
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
