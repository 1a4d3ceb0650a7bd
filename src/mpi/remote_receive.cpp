// The receiving end of a remote link: the sender's hello answered with a grant of its ring's
// capacity, then data frames received into the ring's slots (or staged where, against the
// credits, the ring had no room), credits for what left the ring, and the done after the end.

#include "remote_end.hpp"

#include <algorithm>

namespace ringpipe::mpi::detail {
namespace {

class receiving_end final : public remote_end {
public:
  receiving_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link, remote_options o)
      : remote_end(w, std::move(ring), peer, link, std::move(o), false), slot_(ring_->slot_size()) {}

private:
  // A data frame on its way into the ring.
  struct incoming {
    std::uint32_t messages = 0, pushed = 0;
    std::vector<std::byte> staged; // its messages, where they did not go straight into the ring
    bool active = false, receiving = false, into_ring = false;
  };

  bool stream_turn() override {
    bool moved = io_.test_sends();
    if (phase_ == phase::opening) return open() || moved;
    if (in_.active) {
      moved = take_in() || moved;
      if (in_.active) {
        if (!moved && !io_.transfer_busy()) idle_checks();
        return moved || io_.transfer_busy();
      }
    }
    for (auto f = io_.poll(true); f; f = in_.active ? std::nullopt : io_.poll(true)) {
      moved = true;
      if (common(*f)) continue;
      if (f->kind == frame_kind::end) return end(*f);
      if (f->kind != frame_kind::data) fail(errc::remote_failed, "an unexpected frame");
      begin(*f);
      take_in();
    }
    if (!moved) {
      grant(true);
      idle_checks();
    }
    return moved || io_.transfer_busy();
  }

  // The hello: the sender's message size, answered with the grant.
  bool open() {
    while (auto f = io_.poll(true)) {
      if (common(*f)) continue;
      if (f->kind != frame_kind::hello) fail(errc::remote_failed, "expected the sender's hello");
      io_.send_header(frame_kind::grant, f->count == slot_ ? ring_->capacity() : 0, slot_, false);
      if (f->count != slot_)
        fail(errc::message_size, "rank " + std::to_string(io_.peer()) + " sends " + std::to_string(f->count) +
                                     "-byte messages, this rank's ring takes " + std::to_string(slot_) +
                                     "-byte messages");
      granted_ = ring_->capacity();
      set_stats([&](remote_stats& s) { s.credits = ring_->capacity(); });
      phase_ = phase::streaming;
      return true;
    }
    idle_checks();
    return false;
  }

  void begin(frame& f) {
    in_ = {};
    in_.active = true;
    in_.messages = last_frame_ = f.count;
    if (!f.payload_follows) { // its messages came with it (inline, or before this link opened here)
      if (f.payload.size() != std::size_t{f.count} * slot_)
        fail(errc::remote_failed, "a data frame of " + std::to_string(f.count) + " messages came with " +
                                      std::to_string(f.payload.size()) + " bytes");
      in_.staged = std::move(f.payload);
      return;
    }
    const std::size_t bytes = std::size_t{f.count} * slot_;
    // The credits promise room for every message sent: received in place, in two pieces where
    // the ring wraps (only a ring that had no room, against the credits, is staged).
    if (ring_->space() >= f.count) {
      const auto first = ring_->write_window(f.count);
      const std::span<std::byte> second(ring_->slot(0), first.size() < bytes ? bytes - first.size() : 0);
      io_.receive_payload(first, second, true);
      in_.into_ring = true;
    } else {
      in_.staged.resize(bytes);
      io_.receive_payload(in_.staged, {}, true);
    }
    in_.receiving = true;
  }

  // Moves the frame under way on: its payload, then its staged messages into the ring. True if
  // anything moved; in_.active is false once the whole frame is in the ring.
  bool take_in() {
    bool moved = false;
    if (in_.receiving) {
      if (!io_.payload_done()) return false;
      in_.receiving = false;
      moved = true;
      if (auto instead = io_.payload_instead()) {
        // The sender abandoned the messages after their header (its pipeline stopped): what came
        // in their place is its next frame, an abort.
        (void)common(*instead);
        fail(errc::remote_failed, "a data frame's messages did not follow its header");
      }
      if (in_.into_ring) {
        ring_->commit_push(in_.messages);
        in_.pushed = in_.messages;
        ring_moved();
      }
    }
    while (in_.pushed < in_.messages) { // the ring has room in the end
      const auto pushed = static_cast<std::uint32_t>(
          ring_->push_n_bytes(in_.staged.data() + std::size_t{in_.pushed} * slot_, in_.messages - in_.pushed));
      if (pushed == 0) return moved;
      in_.pushed += pushed;
      count_ += pushed;
      moved = true;
      ring_moved();
    }
    received_ += in_.messages;
    count_ = received_;
    in_.active = false;
    grant(false);
    set_stats([&](remote_stats& s) {
      s.messages = received_;
      ++s.batches;
    });
    return true;
  }

  // Grants what left the ring since the last grant: a sender never sends more than fits. Credits
  // go in lots of a quarter of the ring (or a batch), and whatever left it when the link is idle,
  // unless the sender surely holds a lot besides a frame like the last one (which may be on its
  // way): an idle grant per message cost a ping-pong an MPI message each way, and withholding
  // credits from a sender whose frames were in flight slowed a 4-slot ring of 1 MiB messages.
  void grant(bool idle) {
    const std::uint64_t target = ring_->capacity() + (received_ - ring_->size());
    const std::uint64_t more = target - granted_;
    const std::uint64_t lot = std::min<std::uint64_t>(options_.batch, ring_->capacity() / 4 + 1);
    const bool sender_short = granted_ - received_ < lot + last_frame_; // its credits, at most
    if (more == 0 || (more < lot && !(idle && sender_short))) return;
    io_.send_header(frame_kind::credit, static_cast<std::uint32_t>(more), 0, false);
    granted_ = target;
    set_stats([&](remote_stats& s) { ++s.credit_frames; });
  }

  bool end(const frame& f) {
    if (f.value != received_)
      fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " sent " + std::to_string(f.value) +
                                    " messages, " + std::to_string(received_) + " arrived");
    ring_->close();
    io_.send_header(frame_kind::done, 0, received_, false);
    close(nullptr);
    return true;
  }

  const std::uint32_t slot_;
  std::uint64_t received_ = 0, granted_ = 0;
  std::uint32_t last_frame_ = 0; // messages in the last data frame
  incoming in_;
};

} // namespace

std::unique_ptr<remote_end> make_receiving_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link,
                                               remote_options o) {
  return std::make_unique<receiving_end>(w, std::move(ring), peer, link, std::move(o));
}

} // namespace ringpipe::mpi::detail
