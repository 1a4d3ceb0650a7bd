#pragma once
// The MPI calls of one end of a remote link: frames to and from the peer on one tag per
// direction, one call at a time under the world's lock, none of them waiting (the rank's link
// engine turns every end on one thread). Sends are posted and tested on later turns; one that the
// peer does not complete within the link's timeout fails the link. A data frame is two MPI
// messages on its tag (so in order): its header, then its messages, sent from where they lie (a
// ring's slots) and received where they go.

#include "link_book.hpp"
#include "remote_frames.hpp"

#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>

namespace ringpipe::mpi::detail {

class link_io {
public:
  using clock = std::chrono::steady_clock;
  /// `give_up`: a send or receive the peer has not completed is abandoned once it returns true
  /// (the link is being destroyed, or its ring was cancelled), instead of waiting out the timeout.
  link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout, std::function<bool()> give_up);
  ~link_io();
  link_io(const link_io&) = delete;
  link_io& operator=(const link_io&) = delete;

  /// The memory data transfers read and write (a ring's slots): kept while MPI may still use it,
  /// also after this end is gone (link_book::orphans).
  void hold_memory(std::shared_ptr<const void> memory) noexcept { memory_ = std::move(memory); }
  /// Tests the transfers ends gave up on; drops what MPI completed. Any thread.
  static void test_orphans(world& w) noexcept;

  int self() const noexcept { return world_.rank(); }
  int peer() const noexcept { return peer_; }
  int link() const noexcept { return link_; }
  std::chrono::nanoseconds silent_for() const noexcept { return clock::now() - heard_; }

  void send_header(frame_kind kind, std::uint32_t count, std::uint64_t value, bool forward);
  /// Sends `n` messages from `messages`, which must stay as they are until data_in_flight() is false
  /// (up to inline_data_bytes they are copied at once).
  void send_data(const std::byte* messages, std::size_t n, std::uint32_t slot);
  /// The last word on a failing link (an abort): tested for 2 s at most, never fails the link.
  void send_text(frame_kind kind, const std::string& text, std::uint64_t value, bool forward) noexcept;
  void heartbeat_if_due(bool forward);
  /// Tests the sends under way: true if one completed. Throws when one is late or abandoned.
  bool test_sends();
  bool sends_done() const noexcept { return sends_.empty(); }
  bool data_in_flight() const noexcept;
  /// A data transfer (a send or a payload) under way for less than a few milliseconds: test it
  /// again at once rather than pace (yielding between tests made big messages 4x slower).
  bool transfer_busy() const noexcept;
  /// A failing end: data sends and a payload under way are cancelled (their memory is a ring's),
  /// every other send becomes a last word.
  void abandon_transfers() noexcept;

  /// The next frame in direction `forward`, if one came. Frames of other generations of this
  /// link number (link_book) are dropped (older) or kept for their link (newer).
  std::optional<frame> poll(bool forward);
  /// Starts receiving the messages of the data frame poll() just returned with payload_follows,
  /// into `first` then `second` (a ring's slots up to its end, then from its start).
  void receive_payload(std::span<std::byte> first, std::span<std::byte> second, bool forward);
  /// True once the payload is in place, or a frame came instead: a sender that abandoned the
  /// messages sends its next frame (an abort), which payload_instead() then gives.
  bool payload_done();
  std::optional<frame> payload_instead() { return std::exchange(instead_, std::nullopt); }

private:
  struct part {
    const void* data;
    std::size_t bytes;
  };
  struct outgoing {
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int n = 0;
    std::vector<std::byte> header; // sent from here
    clock::time_point started, deadline;
    bool data = false, last_word = false;
  };
  int tag(bool forward) const noexcept { return 2 * link_ + (forward ? 0 : 1); }
  std::string where() const;
  void check(int status, const char* call) const;
  frame read(const std::vector<std::byte>& raw);
  std::vector<std::byte> take(MPI_Status& status, bool forward);
  void post(std::vector<std::byte> header, std::optional<part> data, bool forward, bool last_word);
  /// Gives requests up to link_book::orphans with the memory they use (cancelled first, where
  /// `cancel`); they are null afterwards.
  void orphan(std::span<MPI_Request> requests, std::vector<std::byte> header, bool cancel) noexcept;
  [[noreturn]] void late_or_abandoned(bool late, const char* what, std::chrono::nanoseconds limit);

  world& world_;
  int peer_, link_;
  std::chrono::nanoseconds timeout_;
  std::function<bool()> give_up_;
  std::uint32_t generation_ = 0;
  clock::time_point heard_, said_;
  std::deque<outgoing> sends_;
  MPI_Request payload_ = MPI_REQUEST_NULL;
  std::span<std::byte> first_, second_;
  clock::time_point payload_started_;
  bool payload_receiving_ = false;
  std::optional<frame> instead_;
  std::shared_ptr<const void> memory_;
};

} // namespace ringpipe::mpi::detail
