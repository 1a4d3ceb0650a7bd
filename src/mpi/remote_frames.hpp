#pragma once
// What the two ends of a remote link say to each other: frames (a header, then text, or for data
// the messages: in the same MPI message up to inline_data_bytes, else as an MPI message of their
// own), and how an idle end paces its polling.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace ringpipe::mpi::detail {

inline constexpr int max_links = 16384; // two tags per link, under MPI's guaranteed tag bound of 32767

// Data frames of up to this many bytes of messages travel in their header's MPI message, copied:
// one send, probe and receive instead of two, most of a small message's time between ranks
// (Open MPI's shared-memory transport sends up to 4 KiB eagerly). Bigger frames are sent from the
// ring's slots and received into them, without a copy.
inline constexpr std::size_t inline_data_bytes = 4096;

// done: the receiver has every message of the stream in its ring; after it neither end sends
// anything on the link, so no frame of it is left for a later link with the same number.
enum class frame_kind : std::uint32_t { hello = 1, grant, data, credit, end, abort, heartbeat, done };

struct frame_header {
  frame_kind kind;
  std::uint32_t count;          // hello: message size; grant: credits; data, credit: messages; abort: text bytes
  std::uint64_t value;          // hello: batch; grant: message size; end: messages sent
  std::uint32_t generation = 0; // link_book: which opening of the link number
  std::uint32_t unused = 0;
};
static_assert(sizeof(frame_header) == 24);

struct frame : frame_header {
  std::vector<std::byte> payload; // text; a data frame's messages if they came inline, or early (link_book)
  bool payload_follows = false;   // a data frame whose messages are the next MPI message: receive_payload
  std::string text() const { return {reinterpret_cast<const char*>(payload.data()), payload.size()}; }
};

// Idle turns: for `spin` after the last progress, a yield (the next frame of a conversation
// comes soon: a sleep, at least ~60 us on Linux, would add to every round trip); then sleeps that
// grow from 10 us to 1 ms (ranks are often oversubscribed: a busy poll would take a core from a
// pipeline's own threads).
class pacer {
public:
  explicit pacer(std::chrono::nanoseconds spin = std::chrono::nanoseconds(0)) : spin_(spin) {}
  /// Yields for at least `spin` after progress (the longest any task asked for).
  void keep_spinning(std::chrono::nanoseconds spin) noexcept { spin_ = std::max(spin_, spin); }
  void progress() noexcept {
    sleep_ = std::chrono::microseconds(0);
    last_ = std::chrono::steady_clock::now();
  }
  void idle() {
    if (sleep_.count() == 0) {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() - last_ >= spin_) sleep_ = std::chrono::microseconds(10);
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
  }

private:
  std::chrono::nanoseconds spin_;
  std::chrono::microseconds sleep_{0};
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

} // namespace ringpipe::mpi::detail
