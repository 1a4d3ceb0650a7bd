#pragma once
// What the two ends of a remote link say to each other (frames: a header, then data or text) and
// the MPI calls that carry them, one at a time under the world's lock, never blocking on a peer
// for longer than the link's timeout.

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ringpipe::mpi::detail {

inline constexpr int max_links = 16384; // two tags per link, under MPI's guaranteed tag bound of 32767

enum class frame_kind : std::uint32_t { hello = 1, grant, data, credit, end, abort, heartbeat };

struct frame_header {
  frame_kind kind;
  std::uint32_t count; // hello: message size; grant: credits; data, credit: messages; abort: text bytes
  std::uint64_t value; // hello: batch; grant: message size; end: messages sent
};
static_assert(sizeof(frame_header) == 16);

struct frame : frame_header {
  std::vector<std::byte> payload;
  std::string text() const { return {reinterpret_cast<const char*>(payload.data()), payload.size()}; }
};

// Sleeps that grow while nothing happens (ranks are often oversubscribed: a busy poll would take
// a core from a pipeline's own threads), and start short again on progress.
class pacer {
public:
  void progress() noexcept { sleep_ = std::chrono::microseconds(0); }
  void idle() {
    if (sleep_.count() == 0) {
      std::this_thread::yield();
      sleep_ = std::chrono::microseconds(10);
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
  }

private:
  std::chrono::microseconds sleep_{0};
};

class link_io {
public:
  using clock = std::chrono::steady_clock;
  link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout)
      : world_(w), peer_(peer), link_(link), timeout_(timeout), heard_(clock::now()), said_(clock::now()) {}

  int self() const noexcept { return world_.rank(); }
  int peer() const noexcept { return peer_; }
  int link() const noexcept { return link_; }
  std::chrono::nanoseconds silent_for() const noexcept { return clock::now() - heard_; }

  void send_header(frame_kind kind, std::uint32_t count, std::uint64_t value, bool forward) {
    const frame_header h{kind, count, value};
    send(&h, sizeof h, nullptr, 0, forward);
  }
  void send_data(const std::byte* messages, std::size_t n, std::uint32_t slot) {
    const frame_header h{frame_kind::data, static_cast<std::uint32_t>(n), 0};
    send(&h, sizeof h, messages, n * slot, true);
  }
  void send_text(frame_kind kind, const std::string& text, bool forward) noexcept {
    try {
      const frame_header h{kind, static_cast<std::uint32_t>(text.size()), 0};
      send(&h, sizeof h, text.data(), text.size(), forward);
    } catch (...) { // the peer may be gone: this end fails anyway
    }
  }
  void heartbeat_if_due(bool forward) {
    if (clock::now() - said_ < timeout_ / 4) return;
    send_header(frame_kind::heartbeat, 0, 0, forward);
  }
  // The next frame from the peer in direction `forward` (as the receiver sees it), if one came.
  std::optional<frame> poll(bool forward) {
    std::lock_guard lock(world_.lock());
    int flag = 0;
    MPI_Status status;
    check(MPI_Iprobe(peer_, tag(forward), MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    std::vector<std::byte> raw(static_cast<std::size_t>(bytes));
    check(MPI_Recv(raw.data(), bytes, MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    if (raw.size() < sizeof(frame_header)) throw error(errc::remote_failed, where() + ": a frame too short to read");
    frame f;
    std::memcpy(static_cast<frame_header*>(&f), raw.data(), sizeof(frame_header));
    f.payload.assign(raw.begin() + sizeof(frame_header), raw.end());
    heard_ = clock::now();
    return f;
  }

private:
  int tag(bool forward) const noexcept { return 2 * link_ + (forward ? 0 : 1); }
  std::string where() const { return "remote link " + std::to_string(link_) + " with rank " + std::to_string(peer_); }
  void check(int status, const char* call) const {
    if (status == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw error(errc::remote_failed,
                where() + ": " + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }
  // One frame: header and body in one buffer, sent without blocking the lock, completed within
  // the timeout (a peer that never receives it has failed or stopped).
  void send(const void* header, std::size_t header_bytes, const void* body, std::size_t body_bytes, bool forward) {
    buffer_.resize(header_bytes + body_bytes);
    std::memcpy(buffer_.data(), header, header_bytes);
    if (body_bytes > 0) std::memcpy(buffer_.data() + header_bytes, body, body_bytes);
    MPI_Request request = MPI_REQUEST_NULL;
    {
      std::lock_guard lock(world_.lock());
      check(MPI_Isend(buffer_.data(), static_cast<int>(buffer_.size()), MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD,
                      &request),
            "MPI_Isend");
    }
    const auto deadline = clock::now() + timeout_;
    pacer pace;
    for (;;) {
      int done = 0;
      {
        std::lock_guard lock(world_.lock());
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      }
      if (done != 0) break;
      if (clock::now() > deadline) {
        std::lock_guard lock(world_.lock());
        MPI_Cancel(&request);
        MPI_Request_free(&request);
        throw error(errc::remote_failed, where() + ": rank " + std::to_string(peer_) +
                                             " did not take a message within " +
                                             std::to_string(timeout_.count() / 1000000) + " ms");
      }
      pace.idle();
    }
    said_ = clock::now();
  }

  world& world_;
  int peer_, link_;
  std::chrono::nanoseconds timeout_;
  clock::time_point heard_, said_;
  std::vector<std::byte> buffer_;
};

} // namespace ringpipe::mpi::detail
