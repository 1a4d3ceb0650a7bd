#pragma once
// What the two ends of a remote link say to each other (frames: a header, then data or text) and
// the MPI calls that carry them, one at a time under the world's lock, never blocking on a peer
// for longer than the link's timeout.

#include "link_book.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ringpipe::mpi::detail {

inline constexpr int max_links = 16384; // two tags per link, under MPI's guaranteed tag bound of 32767

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
  /// `give_up`: a send not yet taken by the peer is abandoned once it returns true (the link is
  /// being destroyed, or its ring was cancelled), instead of waiting out the timeout.
  link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout, std::function<bool()> give_up)
      : world_(w), peer_(peer), link_(link), timeout_(timeout), give_up_(std::move(give_up)), heard_(clock::now()),
        said_(clock::now()) {
    std::lock_guard lock(world_.lock());
    generation_ = ++world_.link_book().opened[{link_, peer_}];
  }

  int self() const noexcept { return world_.rank(); }
  int peer() const noexcept { return peer_; }
  int link() const noexcept { return link_; }
  std::chrono::nanoseconds silent_for() const noexcept { return clock::now() - heard_; }

  void send_header(frame_kind kind, std::uint32_t count, std::uint64_t value, bool forward) {
    const frame_header h{kind, count, value, generation_};
    send(&h, sizeof h, nullptr, 0, forward);
  }
  void send_data(const std::byte* messages, std::size_t n, std::uint32_t slot) {
    const frame_header h{frame_kind::data, static_cast<std::uint32_t>(n), 0, generation_};
    send(&h, sizeof h, messages, n * slot, true);
  }
  void send_text(frame_kind kind, const std::string& text, bool forward) noexcept {
    try {
      // The last word on a failing link: tried for a short while only, whatever give_up says (a
      // peer that is still there takes it at once).
      const frame_header h{kind, static_cast<std::uint32_t>(text.size()), 0, generation_};
      send(&h, sizeof h, text.data(), text.size(), forward, std::min<std::chrono::nanoseconds>(timeout_, last_word));
    } catch (...) { // the peer may be gone: this end fails anyway
    }
  }
  void heartbeat_if_due(bool forward) {
    if (clock::now() - said_ < timeout_ / 4) return;
    send_header(frame_kind::heartbeat, 0, 0, forward);
  }
  // The next frame from the peer in direction `forward` (as the receiver sees it), if one came.
  // Frames of other generations of this link number are dropped (older) or kept (newer).
  std::optional<frame> poll(bool forward) {
    std::lock_guard lock(world_.lock());
    auto& early = world_.link_book().early;
    if (const auto kept = early.find({peer_, tag(forward), generation_}); kept != early.end()) {
      auto raw = std::move(kept->second.front());
      kept->second.pop_front();
      if (kept->second.empty()) early.erase(kept);
      return read(raw);
    }
    for (;;) {
      int flag = 0;
      MPI_Status status;
      check(MPI_Iprobe(peer_, tag(forward), MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
      if (flag == 0) return std::nullopt;
      int bytes = 0;
      MPI_Get_count(&status, MPI_BYTE, &bytes);
      std::vector<std::byte> raw(static_cast<std::size_t>(bytes));
      check(MPI_Recv(raw.data(), bytes, MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
      if (raw.size() < sizeof(frame_header)) throw error(errc::remote_failed, where() + ": a frame too short to read");
      frame_header h;
      std::memcpy(&h, raw.data(), sizeof h);
      if (h.generation == generation_) return read(raw);
      if (h.generation > generation_) early[{peer_, tag(forward), h.generation}].push_back(std::move(raw));
    }
  }

private:
  int tag(bool forward) const noexcept { return 2 * link_ + (forward ? 0 : 1); }
  frame read(const std::vector<std::byte>& raw) {
    frame f;
    std::memcpy(static_cast<frame_header*>(&f), raw.data(), sizeof(frame_header));
    f.payload.assign(raw.begin() + sizeof(frame_header), raw.end());
    heard_ = clock::now();
    return f;
  }
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
  static constexpr std::chrono::nanoseconds last_word = std::chrono::seconds(2);
  void send(const void* header, std::size_t header_bytes, const void* body, std::size_t body_bytes, bool forward,
            std::optional<std::chrono::nanoseconds> last = std::nullopt) {
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
    const auto deadline = clock::now() + last.value_or(timeout_);
    pacer pace;
    for (;;) {
      int done = 0;
      {
        std::lock_guard lock(world_.lock());
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      }
      if (done != 0) break;
      const bool late = clock::now() > deadline, abandoned = !late && !last && give_up_ && give_up_();
      if (late || abandoned) {
        {
          std::lock_guard lock(world_.lock());
          MPI_Cancel(&request);
          MPI_Request_free(&request);
        }
        if (abandoned)
          throw error(errc::remote_failed, where() + ": a frame abandoned before rank " + std::to_string(peer_) +
                                               " took it (the link ended here)");
        throw error(errc::remote_failed, where() + ": rank " + std::to_string(peer_) +
                                             " did not take a message within " +
                                             std::to_string(last.value_or(timeout_).count() / 1000000) + " ms");
      }
      pace.idle();
    }
    said_ = clock::now();
  }

  world& world_;
  int peer_, link_;
  std::chrono::nanoseconds timeout_;
  std::function<bool()> give_up_;
  std::uint32_t generation_ = 0;
  clock::time_point heard_, said_;
  std::vector<std::byte> buffer_;
};

} // namespace ringpipe::mpi::detail
