#pragma once
// One end of a remote link, as a task of the rank's link engine: what both ends share (opening,
// failing, telling the peer, halting, stats); the sender's and the receiver's turns are in
// remote_send.cpp and remote_receive.cpp. Every frame of a link travels on one tag per direction
// (forward: hello, data, end, abort, heartbeat; backward: grant, credit, done, abort, heartbeat),
// so MPI's ordering between two ranks on one tag keeps them in order.

#include "link_engine.hpp"
#include "link_io.hpp"

#include <ringpipe/mpi/remote.hpp>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace ringpipe::mpi::detail {

class remote_end : public engine_task {
public:
  remote_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link, remote_options o, bool sending);
  remote_end(const remote_end&) = delete;
  remote_end& operator=(const remote_end&) = delete;
  /// Registers with the rank's link engine (after construction: the engine turns it at once).
  void start();
  /// Ends the link at once, telling the peer `why` (unless it already ended), and returns once
  /// the engine let go of this end: its stats are final and it may be destroyed.
  void halt(std::string why) noexcept;
  void wait(std::chrono::nanoseconds timeout);
  remote_stats stats() const;

  bool turn() noexcept override;
  bool ended() const noexcept override { return phase_ == phase::ended; }
  void retired() noexcept override;
  std::chrono::nanoseconds idle_spin() const noexcept override { return options_.idle_spin; }

protected:
  // opening: hello and grant; streaming; ending: the sender waits for the receiver's done;
  // closing: the last sends (a done, an abort) go out before the end is over.
  enum class phase { opening, streaming, ending, closing, ended };

  virtual bool stream_turn() = 0; // the sender's or the receiver's turn, opening to ending
  std::string label() const;
  [[noreturn]] void fail(errc code, const std::string& why) const { throw error(code, label() + ": " + why); }
  /// Tells the peer why this end gives up, then fails with `why`.
  [[noreturn]] void abort_link(const std::string& why);
  /// A turn that moved nothing: stops for a destroyed link or a cancelled ring; heartbeats when
  /// idle; fails a silent peer.
  void idle_checks();
  /// A frame the peer may send at any time: true if handled.
  bool common(const frame& f);
  /// The stream is over (`failure` null) or failed: the last sends go out, then the end ends.
  void close(const std::exception_ptr& failure);
  /// Why this end was halted: a stop's reason, or its destruction.
  std::string halted() const;
  bool stopping() const noexcept { return stop_.load(std::memory_order_acquire); }
  /// Wakes whoever sleeps on the ring's other side, after this end moved messages in or out.
  void ring_moved() const {
    if (options_.ring_moved) options_.ring_moved();
  }
  template <class Fn> void set_stats(Fn&& fn) {
    std::lock_guard lock(mutex_);
    fn(stats_);
  }

  world& world_;
  link_io io_;
  std::shared_ptr<ring_buffer> ring_;
  remote_options options_;
  bool sending_;
  phase phase_ = phase::opening;
  std::uint64_t count_ = 0; // messages sent (sender) or put in the ring (receiver): what an abort tells the peer

private:
  void failed(const std::exception_ptr& e, const std::string& what) noexcept;
  std::string local_cause() const;
  void tell_peer(const std::string& why) noexcept;

  std::atomic<bool> stop_{false};
  bool told_ = false, peer_gave_up_ = false; // an abort sent to the peer; one received from it
  std::exception_ptr result_;                // while closing
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false, retired_ = false;
  std::exception_ptr failure_;
  std::string halt_reason_;
  remote_stats stats_;
};

std::unique_ptr<remote_end> make_sending_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link,
                                             remote_options o);
std::unique_ptr<remote_end> make_receiving_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link,
                                               remote_options o);

} // namespace ringpipe::mpi::detail
