#pragma once
// The MPI calls of one end of a remote link: frames to and from the peer on one tag per
// direction, one call at a time under the world's lock, never blocking on the peer for longer
// than the link's timeout. A data frame is two MPI messages on its tag (so in order): its header,
// then its messages, sent from where they lie (a ring's slots) and received where they go.

#include "link_book.hpp"
#include "remote_frames.hpp"

#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <functional>
#include <optional>
#include <span>

namespace ringpipe::mpi::detail {

class link_io {
public:
  using clock = std::chrono::steady_clock;
  /// `give_up`: a send or receive the peer has not completed is abandoned once it returns true
  /// (the link is being destroyed, or its ring was cancelled), instead of waiting out the timeout.
  /// `spin`: how long a wait for a send or receive polls before it sleeps (remote_options::idle_spin).
  link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout, std::chrono::nanoseconds spin,
          std::function<bool()> give_up);

  int self() const noexcept { return world_.rank(); }
  int peer() const noexcept { return peer_; }
  int link() const noexcept { return link_; }
  std::chrono::nanoseconds silent_for() const noexcept { return clock::now() - heard_; }

  void send_header(frame_kind kind, std::uint32_t count, std::uint64_t value, bool forward);
  void send_data(const std::byte* messages, std::size_t n, std::uint32_t slot);
  /// The last word on a failing link (an abort): tried for 2 s at most, never throws.
  void send_text(frame_kind kind, const std::string& text, std::uint64_t value, bool forward) noexcept;
  void heartbeat_if_due(bool forward);
  /// The next frame in direction `forward`, if one came. Frames of other generations of this
  /// link number (link_book) are dropped (older) or kept for their link (newer).
  std::optional<frame> poll(bool forward);
  /// The messages of the data frame poll() just returned with payload_follows, into `first`
  /// then `second` (a ring's slots up to its end, then from its start). A sender that abandoned
  /// them sends its next frame (an abort) instead: that frame is returned.
  std::optional<frame> receive_payload(std::span<std::byte> first, std::span<std::byte> second, bool forward);

private:
  struct part {
    const void* data;
    std::size_t bytes;
  };
  int tag(bool forward) const noexcept { return 2 * link_ + (forward ? 0 : 1); }
  std::string where() const;
  void check(int status, const char* call) const;
  frame read(const std::vector<std::byte>& raw);
  std::vector<std::byte> take(MPI_Status& status, bool forward);
  void send(std::initializer_list<part> parts, bool forward, std::optional<std::chrono::nanoseconds> last);
  void complete(MPI_Request* requests, int n, std::optional<std::chrono::nanoseconds> last, const char* what,
                MPI_Status* statuses = nullptr);

  world& world_;
  int peer_, link_;
  std::chrono::nanoseconds timeout_, spin_;
  std::function<bool()> give_up_;
  std::uint32_t generation_ = 0;
  clock::time_point heard_, said_;
  std::vector<std::byte> header_; // what is being sent (small: headers and texts)
};

} // namespace ringpipe::mpi::detail
