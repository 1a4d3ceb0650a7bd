// Both ends of a remote link, each on a thread of its own. Every frame of a link travels on one
// tag per direction (forward: hello, data, end, abort, heartbeat; backward: grant, credit, abort,
// heartbeat), so MPI's ordering between two ranks on one tag keeps them in order.

#include "link_io.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/remote.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <thread>

namespace ringpipe::mpi {
namespace detail {

class remote_end {
public:
  remote_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link, remote_options o, bool sending)
      : io_(w, peer, link, o.timeout, o.idle_spin,
            [this] { return stop_.load(std::memory_order_acquire) || ring_->cancelled(); }),
        ring_(std::move(ring)), options_(o), sending_(sending) {
    if (link < 0 || link >= max_links)
      throw error(errc::invalid_argument,
                  "remote link " + std::to_string(link) + ": link numbers are 0 to " + std::to_string(max_links - 1));
    if (peer < 0 || peer >= w.size() || peer == w.rank())
      throw error(errc::invalid_argument,
                  label() + ": rank " + std::to_string(peer) + " is not another rank of " + std::to_string(w.size()));
    if (options_.batch == 0) throw error(errc::invalid_argument, label() + ": remote_options::batch is 0");
    thread_ = std::thread([this] { run(); });
  }
  ~remote_end() { halt({}); }
  /// Ends the link at once, telling the peer `why` (unless it already ended), and returns once
  /// this end's thread has left: its stats are final.
  void halt(std::string why) noexcept {
    {
      std::lock_guard lock(mutex_);
      if (halt_reason_.empty()) halt_reason_ = std::move(why);
    }
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }
  remote_end(const remote_end&) = delete;
  remote_end& operator=(const remote_end&) = delete;

  void wait(std::chrono::nanoseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return done_; }))
      throw error(errc::timeout,
                  label() + ": not finished within " + std::to_string(timeout.count() / 1000000) + " ms");
    if (failure_) std::rethrow_exception(failure_);
  }
  remote_stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

private:
  std::string label() const {
    const auto me = std::to_string(io_.self()), peer = std::to_string(io_.peer());
    return "remote link " + std::to_string(io_.link()) + " (rank " + (sending_ ? me : peer) + " -> rank " +
           (sending_ ? peer : me) + ", ring '" + ring_->name() + "')";
  }

  void run() {
    try {
      if (sending_)
        send_stream();
      else
        receive_stream();
      finish(nullptr);
    } catch (const error& e) {
      // A send or receive abandoned because the ring was cancelled or the link destroyed: the
      // cause says more than the abandonment.
      if (const auto cause = local_cause(); !cause.empty() && !told_ && !peer_gave_up_) {
        tell_peer(cause);
        finish(std::make_exception_ptr(error(errc::remote_failed, label() + ": " + cause)));
        return;
      }
      tell_peer(e.what());
      finish(std::make_exception_ptr(e));
    } catch (const std::exception& e) {
      tell_peer(e.what());
      finish(std::make_exception_ptr(error(errc::remote_failed, label() + ": " + e.what())));
    }
  }
  std::string local_cause() const {
    if (ring_->cancelled())
      return "its ring on rank " + std::to_string(io_.self()) + " was cancelled: " + ring_->cancel_reason();
    if (stop_.load(std::memory_order_acquire)) return halted();
    return {};
  }
  // Why this end was halted: a stop's reason, or its destruction.
  std::string halted() const {
    {
      std::lock_guard lock(mutex_);
      if (!halt_reason_.empty()) return halt_reason_;
    }
    return "the link was destroyed on rank " + std::to_string(io_.self()) + " before its stream ended";
  }
  // A failure of this end's own (a send it abandoned, a peer gone silent, a frame it could not
  // read) is told to the peer, which may be waiting for the rest of a frame; not one the peer
  // told this end of, nor one already told.
  void tell_peer(const std::string& why) noexcept {
    if (told_ || peer_gave_up_) return;
    told_ = true;
    io_.send_text(frame_kind::abort, why, count_, sending_);
  }
  void finish(std::exception_ptr failure) {
    // The ring's other side (a pipeline's outlet or inlet) must not wait for a link that is gone.
    if (failure) ring_->cancel(what(failure));
    std::lock_guard lock(mutex_);
    done_ = true;
    failure_ = std::move(failure);
    stats_.messages = count_; // a frame partly pushed into the ring included
    changed_.notify_all();
  }
  static std::string what(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return x.what();
    }
  }
  [[noreturn]] void fail(errc code, const std::string& why) { throw error(code, label() + ": " + why); }
  // Tells the peer why this end gives up, then fails with `why`.
  [[noreturn]] void abort_link(const std::string& why) {
    told_ = true;
    io_.send_text(frame_kind::abort, why, count_, sending_);
    fail(errc::remote_failed, why);
  }
  // Stops for a destroyed link or a cancelled ring; heartbeats when idle; fails a silent peer.
  void idle_turn(pacer& pace) {
    // A cancelled ring first: its reason (a pipeline's failure) says more than the destruction
    // that often follows it at once.
    if (ring_->cancelled())
      abort_link("its ring on rank " + std::to_string(io_.self()) + " was cancelled: " + ring_->cancel_reason());
    if (stop_.load(std::memory_order_acquire)) abort_link(halted());
    io_.heartbeat_if_due(sending_);
    if (io_.silent_for() > options_.timeout)
      fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " sent nothing for " +
                                    std::to_string(io_.silent_for().count() / 1000000) +
                                    " ms (it failed, stopped or is stuck)");
    pace.idle();
  }
  // A frame the peer may send at any time: true if handled.
  bool common(const frame& f) {
    if (f.kind == frame_kind::heartbeat) return true;
    if (f.kind != frame_kind::abort) return false;
    peer_gave_up_ = true;
    const std::string why = "rank " + std::to_string(io_.peer()) + " gave up the link: " + f.text();
    if (sending_) ring_->cancel(label() + ": " + why); // the producing pipeline stops too
    fail(errc::remote_failed, why);
  }

  void send_stream() {
    const std::uint32_t slot = ring_->slot_size();
    io_.send_header(frame_kind::hello, slot, options_.batch, true);
    pacer pace(options_.idle_spin);
    std::uint32_t credits = 0;
    for (;;) { // the grant: the receiver's message size and its credits
      if (auto f = io_.poll(false)) {
        if (common(*f)) continue;
        if (f->kind != frame_kind::grant) fail(errc::remote_failed, "expected the receiver's grant");
        if (f->value != slot)
          fail(errc::message_size, "this rank sends " + std::to_string(slot) + "-byte messages, rank " +
                                       std::to_string(io_.peer()) + "'s ring takes " + std::to_string(f->value) +
                                       "-byte messages");
        credits = f->count;
        break;
      }
      idle_turn(pace);
    }
    set_stats([&](remote_stats& s) { s.credits = credits; });
    // Frames of at most `batch` messages and 4 MiB (one message where messages are bigger): a
    // frame's slots come back only once MPI has taken all of it, so smaller frames keep both rings
    // moving (16 MiB frames were no faster for 1 MiB messages).
    const std::uint64_t frame_messages =
        std::max<std::uint64_t>(1, std::min<std::uint64_t>(options_.batch, (std::uint64_t{4} << 20) / slot));
    // The receiver grants room in its ring: its capacity, then every message that left the ring.
    std::uint64_t allowed = credits, sent = 0;
    for (;;) {
      while (auto f = io_.poll(false)) {
        if (common(*f)) continue;
        if (f->kind != frame_kind::credit) fail(errc::remote_failed, "an unexpected frame");
        allowed += f->count;
      }
      const auto room = static_cast<std::uint32_t>(std::min<std::uint64_t>(allowed - sent, frame_messages));
      // Sent from the ring's slots, given back once MPI has taken them: no copy here.
      const auto window = room > 0 ? ring_->read_window(room) : std::span<const std::byte>{};
      const std::size_t n = window.size() / slot;
      if (n > 0) {
        io_.send_data(window.data(), n, slot);
        ring_->drop_n(n);
        sent += n;
        count_ = sent;
        const auto in_flight = static_cast<std::uint32_t>(sent - (allowed - credits)); // not yet out of its ring
        set_stats([&](remote_stats& s) {
          s.messages = sent;
          ++s.batches;
          s.max_in_flight = std::max(s.max_in_flight, in_flight);
        });
        pace.progress();
        continue;
      }
      if (room > 0 && ring_->drained()) {
        io_.send_header(frame_kind::end, 0, sent, true);
        return await_done();
      }
      idle_turn(pace);
    }
  }
  // After the end: the receiver's credits and heartbeats until its done. No heartbeat from here
  // (the receiver reads nothing after the end); its ring has ended, so a cancel no longer matters.
  void await_done() {
    pacer pace(options_.idle_spin);
    for (;;) {
      while (auto f = io_.poll(false)) {
        if (f->kind == frame_kind::done) return;
        if (!common(*f) && f->kind != frame_kind::credit) fail(errc::remote_failed, "an unexpected frame");
      }
      if (stop_.load(std::memory_order_acquire))
        abort_link(halted() + " (rank " + std::to_string(io_.peer()) + " did not yet confirm the whole stream)");
      if (io_.silent_for() > options_.timeout)
        fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " did not confirm the end of the stream in " +
                                      std::to_string(io_.silent_for().count() / 1000000) + " ms");
      pace.idle();
    }
  }

  // The sender abandoned a data frame after its header (its pipeline stopped): what came in place
  // of the messages is its next frame, an abort.
  [[noreturn]] void frame_instead_of_data(const frame& f) {
    (void)common(f);
    fail(errc::remote_failed, "a data frame's messages did not follow its header");
  }

  void receive_stream() {
    const std::uint32_t slot = ring_->slot_size();
    pacer pace(options_.idle_spin);
    for (;;) { // the hello: the sender's message size
      if (auto f = io_.poll(true)) {
        if (common(*f)) continue;
        if (f->kind != frame_kind::hello) fail(errc::remote_failed, "expected the sender's hello");
        io_.send_header(frame_kind::grant, f->count == slot ? ring_->capacity() : 0, slot, false);
        if (f->count != slot)
          fail(errc::message_size, "rank " + std::to_string(io_.peer()) + " sends " + std::to_string(f->count) +
                                       "-byte messages, this rank's ring takes " + std::to_string(slot) +
                                       "-byte messages");
        break;
      }
      idle_turn(pace);
    }
    set_stats([&](remote_stats& s) { s.credits = ring_->capacity(); });
    std::uint64_t received = 0, granted = ring_->capacity();
    // Grants what left the ring since the last grant: a sender never sends more than fits.
    const auto grant = [&](bool any) {
      const std::uint64_t target = ring_->capacity() + (received - ring_->size());
      const std::uint64_t more = target - granted;
      if (more == 0 || (!any && more < std::min<std::uint64_t>(options_.batch, ring_->capacity() / 4 + 1))) return;
      io_.send_header(frame_kind::credit, static_cast<std::uint32_t>(more), 0, false);
      granted = target;
    };
    for (;;) {
      auto f = io_.poll(true);
      if (!f) {
        grant(true);
        idle_turn(pace);
        continue;
      }
      pace.progress();
      if (common(*f)) continue;
      if (f->kind == frame_kind::end) {
        if (f->value != received)
          fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " sent " + std::to_string(f->value) +
                                        " messages, " + std::to_string(received) + " arrived");
        ring_->close();
        io_.send_header(frame_kind::done, 0, received, false);
        return;
      }
      if (f->kind != frame_kind::data) fail(errc::remote_failed, "an unexpected frame");
      const std::size_t bytes = std::size_t{f->count} * slot;
      if (f->payload_follows) {
        // The credits promise room for every message sent: received in place, in two pieces
        // where the ring wraps (only a ring that had no room, against the credits, is staged).
        if (ring_->space() >= f->count) {
          const auto first = ring_->write_window(f->count);
          const std::span<std::byte> second(ring_->slot(0), first.size() < bytes ? bytes - first.size() : 0);
          if (auto instead = io_.receive_payload(first, second, true)) frame_instead_of_data(*instead);
          ring_->commit_push(f->count);
          f->count = 0;
        } else {
          f->payload.resize(bytes);
          if (auto instead = io_.receive_payload(f->payload, {}, true)) frame_instead_of_data(*instead);
        }
      }
      const std::byte* at = f->payload.data();
      for (std::uint32_t left = f->count; left > 0;) { // the ring has room in the end
        const auto pushed = static_cast<std::uint32_t>(ring_->push_n_bytes(at, left));
        at += std::size_t{pushed} * slot;
        left -= pushed;
        count_ += pushed;
        if (left > 0) idle_turn(pace);
      }
      received += bytes / slot;
      count_ = received;
      grant(false);
      set_stats([&](remote_stats& s) {
        s.messages = received;
        ++s.batches;
      });
    }
  }

  template <class Fn> void set_stats(Fn&& fn) {
    std::lock_guard lock(mutex_);
    fn(stats_);
  }

  link_io io_;
  std::shared_ptr<ring_buffer> ring_;
  remote_options options_;
  bool sending_;
  std::atomic<bool> stop_{false};
  bool told_ = false, peer_gave_up_ = false; // an abort sent to the peer; one received from it
  std::uint64_t count_ = 0; // messages sent (sender) or put in the ring (receiver): what an abort tells the peer
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;
  std::exception_ptr failure_;
  std::string halt_reason_;
  remote_stats stats_;
  std::thread thread_; // last: started once everything above exists
};

} // namespace detail

remote_sender::remote_sender(world& w, std::shared_ptr<ring_buffer> from, int to, int link, remote_options options)
    : end_(std::make_unique<detail::remote_end>(w, std::move(from), to, link, options, true)) {}
remote_sender::~remote_sender() = default;
void remote_sender::wait(std::chrono::nanoseconds timeout) { end_->wait(timeout); }
void remote_sender::stop(std::string why) noexcept { end_->halt(std::move(why)); }
remote_stats remote_sender::stats() const { return end_->stats(); }

remote_receiver::remote_receiver(world& w, std::shared_ptr<ring_buffer> into, int from, int link,
                                 remote_options options)
    : end_(std::make_unique<detail::remote_end>(w, std::move(into), from, link, options, false)) {}
remote_receiver::~remote_receiver() = default;
void remote_receiver::wait(std::chrono::nanoseconds timeout) { end_->wait(timeout); }
void remote_receiver::stop(std::string why) noexcept { end_->halt(std::move(why)); }
remote_stats remote_receiver::stats() const { return end_->stats(); }

} // namespace ringpipe::mpi
