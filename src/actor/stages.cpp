#include "stages.hpp"

#include <cstring>

namespace ringpipe::detail {

// Sources, transforms and sinks move runs of messages: one call of the user's function per run
// (through its adapter, which calls it per message or once per batch), reading the input ring's
// slots and filling the output ring's in place; round-robin over several outputs goes one
// message at a time.
std::size_t source_stage::turn() {
  if (runs_possible()) {
    const auto out = out_run(batch());
    if (out.room == 0) return 0; // a batch source never sees an empty span
    run_progress p;
    const watched_run watch(*this, p, false);
    try {
      generate_(out.data, out.room, p);
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
          const watched_run watch(*this, p, false);
          generate_(out_buf_.data(), 1, p);
          if (p.made == 1) push(fan, out_buf_.data());
          moved += p.made;
          if (p.ended) {
            end_stream();
            break;
          }
          if (p.made == 0 || p.stop_seen()) break; // a batch source with nothing yet, or stopped
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
    const auto out = out_run(batch());
    const auto in = in_run(out.room);
    run_progress p;
    const watched_run watch(*this, p, true);
    try {
      if (in.size() > 0) transform_(in.data(), in.size() / in_size(), out.data, p);
    } catch (...) {
      lose_at_throw(p);
      push_run(p.made);
      throw;
    }
    moved = p.taken; // all of the run, unless the stage was stopped in it
    take_run(moved);
    push_run(p.made);
  } else {
    moved = each_message([&](const std::byte* in, auto& fan) {
      run_progress p;
      const watched_run watch(*this, p, false); // popped: no longer in the ring
      transform_(in, 1, out_buf_.data(), p);
      if (p.made == 1) push(fan, out_buf_.data());
    });
  }
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

std::size_t sink_stage::turn() {
  const auto in = in_run(batch());
  run_progress p;
  const watched_run watch(*this, p, true);
  try {
    if (in.size() > 0) consume_(in.data(), in.size() / in_size(), p);
  } catch (...) {
    lose_at_throw(p);
    throw;
  }
  const std::size_t moved = p.taken; // all of the run, unless the stage was stopped in it
  take_run(moved);
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

std::size_t mover_stage::turn() {
  std::size_t moved = 0;
  if (inputs_.all().size() == 1 && outputs_.size() == 1) {
    // One ring to one ring (staged links): one copy per turn, slots to slots.
    const auto out = out_run(batch());
    const auto in = in_run(out.room);
    moved = in.size() / in_size();
    if (moved > 0) std::memcpy(out.data, in.data(), in.size());
    take_run(moved);
    push_run(moved);
  } else {
    moved = each_message([&](const std::byte* in, auto& fan) { push(fan, in); });
  }
  return end_if_drained(moved, batch(), inputs_, [&] { end_stream(); });
}

} // namespace ringpipe::detail
