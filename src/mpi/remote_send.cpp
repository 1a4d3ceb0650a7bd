// The sending end of a remote link: the hello, then frames of messages from its ring as the
// receiver's credits allow, one data frame under way at a time (its slots leave the ring once MPI
// has taken them), then the end and the receiver's done.

#include "remote_end.hpp"

#include <algorithm>

namespace ringpipe::mpi::detail {
namespace {

class sending_end final : public remote_end {
public:
  sending_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link, remote_options o)
      : remote_end(w, std::move(ring), peer, link, std::move(o), true), slot_(ring_->slot_size()),
        // Frames of at most `batch` messages and 4 MiB (one message where messages are bigger): a
        // frame's slots come back only once MPI has taken all of it, so smaller frames keep both
        // rings moving (16 MiB frames were no faster for 1 MiB messages).
        frame_messages_(
            std::max<std::uint64_t>(1, std::min<std::uint64_t>(options_.batch, (std::uint64_t{4} << 20) / slot_))) {}

private:
  bool stream_turn() override {
    bool moved = io_.test_sends();
    if (in_flight_ > 0 && !io_.data_in_flight()) moved = taken() || moved;
    if (phase_ == phase::opening) moved = open() || moved;
    if (phase_ == phase::streaming) moved = stream() || moved;
    if (phase_ == phase::ending) moved = await_done() || moved;
    return moved || io_.transfer_busy();
  }

  // MPI has taken the frame: its slots are free.
  bool taken() {
    ring_->drop_n(in_flight_);
    ring_moved();
    sent_ += in_flight_;
    count_ = sent_;
    const auto unacknowledged = static_cast<std::uint32_t>(sent_ - (allowed_ - credits_)); // not yet out of its ring
    set_stats([&](remote_stats& s) {
      s.messages = sent_;
      ++s.batches;
      s.max_in_flight = std::max(s.max_in_flight, unacknowledged);
    });
    in_flight_ = 0;
    return true;
  }

  // The hello, then the grant: the receiver's message size and its credits.
  bool open() {
    if (!hello_sent_) {
      io_.send_header(frame_kind::hello, slot_, options_.batch, true);
      hello_sent_ = true;
    }
    while (auto f = io_.poll(false)) {
      if (common(*f)) continue;
      if (f->kind != frame_kind::grant) fail(errc::remote_failed, "expected the receiver's grant");
      if (f->value != slot_)
        fail(errc::message_size, "this rank sends " + std::to_string(slot_) + "-byte messages, rank " +
                                     std::to_string(io_.peer()) + "'s ring takes " + std::to_string(f->value) +
                                     "-byte messages");
      credits_ = allowed_ = f->count;
      set_stats([&](remote_stats& s) { s.credits = credits_; });
      phase_ = phase::streaming;
      return true;
    }
    idle_checks();
    return false;
  }

  // The receiver grants room in its ring: its capacity, then every message that left the ring.
  bool stream() {
    bool moved = false;
    while (auto f = io_.poll(false)) {
      moved = true;
      if (common(*f)) continue;
      if (f->kind != frame_kind::credit) fail(errc::remote_failed, "an unexpected frame");
      allowed_ += f->count;
    }
    if (in_flight_ > 0) {
      if (!moved && !io_.transfer_busy()) idle_checks(); // a stop or a silent peer, while MPI has the frame
      return moved;
    }
    const auto room = static_cast<std::uint32_t>(std::min<std::uint64_t>(allowed_ - sent_, frame_messages_));
    // Sent from the ring's slots, given back once MPI has taken them: no copy here.
    const auto window = room > 0 ? ring_->read_window(room) : std::span<const std::byte>{};
    const std::size_t n = window.size() / slot_;
    if (n > 0) {
      io_.send_data(window.data(), n, slot_);
      in_flight_ = n;
      return true;
    }
    if (room > 0 && ring_->drained()) {
      io_.send_header(frame_kind::end, 0, sent_, true);
      phase_ = phase::ending;
      return true;
    }
    if (!moved) idle_checks();
    return moved;
  }

  // After the end: the receiver's credits and heartbeats until its done. No heartbeat from here
  // (the receiver reads nothing after the end); its ring has ended, so a cancel no longer matters.
  bool await_done() {
    bool moved = false;
    while (auto f = io_.poll(false)) {
      moved = true;
      if (f->kind == frame_kind::done) {
        close(nullptr);
        return true;
      }
      if (!common(*f) && f->kind != frame_kind::credit) fail(errc::remote_failed, "an unexpected frame");
    }
    if (stopping())
      abort_link(halted() + " (rank " + std::to_string(io_.peer()) + " did not yet confirm the whole stream)");
    if (io_.silent_for() > options_.timeout)
      fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " did not confirm the end of the stream in " +
                                    std::to_string(io_.silent_for().count() / 1000000) + " ms");
    return moved;
  }

  const std::uint32_t slot_;
  const std::uint64_t frame_messages_;
  bool hello_sent_ = false;
  std::uint32_t credits_ = 0; // the grant
  std::uint64_t allowed_ = 0; // the grant and every credit since
  std::uint64_t sent_ = 0;    // taken by MPI
  std::size_t in_flight_ = 0; // the data frame MPI is taking
};

} // namespace

std::unique_ptr<remote_end> make_sending_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link,
                                             remote_options o) {
  return std::make_unique<sending_end>(w, std::move(ring), peer, link, std::move(o));
}

} // namespace ringpipe::mpi::detail
