#pragma once
// A remote link: a stream of messages from a ring on one rank to a ring on another, over MPI.
// The sender drains its ring (a pipeline's outlet, say) into MPI messages of up to `batch`
// messages; the receiver pushes them into its ring (a pipeline's inlet), in order, and closes it
// after the last one. Flow control is by credits: the sender never has more messages in flight
// than the receiver granted (its ring's capacity at first, then what it pushed on), so memory on
// both sides stays bounded whatever the rates; MPI's own queue of unexpected messages never grows
// past that. Message sizes are checked when the link opens (both sizes named if they differ).
//
// Every link end of a rank moves on one thread of the world's (started with the first link), so
// a rank's links take one core's turn between them, not one each.
//
// Failure: a sender whose ring was cancelled (its pipeline failed) tells the receiver, which
// cancels its ring with the reason and the sender's rank; a peer that sends nothing (not even the
// heartbeat both sides send when idle) for `timeout` fails the link on this side. wait() throws
// the link's failure; destroying a running link aborts it and tells the peer.
//
//   rank 0: mpi::remote_sender tx(w, p.outlet<sample>("to-1"), 1, /*link*/ 0);
//   rank 1: mpi::remote_receiver rx(w, p.inlet<sample>("from-0"), 0, /*link*/ 0);

#include <ringpipe/mpi/world.hpp>
#include <ringpipe/ring.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace ringpipe::mpi {

struct remote_options {
  std::uint32_t batch = 4096;                                  ///< messages per MPI message at most
  std::chrono::nanoseconds timeout = std::chrono::seconds(30); ///< a silent peer fails the link
  /// How long the rank's link thread, which moves every link's frames, keeps polling (yielding
  /// its core) after the last frame before it sleeps (10 us growing to 1 ms): the latency of a
  /// quiet link against the cores an idle one takes. The longest of the open links' counts.
  std::chrono::nanoseconds idle_spin = std::chrono::microseconds(200);
  /// Called on the link thread after the link put messages in its ring (receiver) or took them
  /// out (sender): wakes whoever sleeps on the ring's other side, which would otherwise find out
  /// on its next poll, up to a millisecond later. Keep it short. Null: nobody to wake.
  std::function<void()> ring_moved;
};

struct remote_stats {
  std::uint64_t messages = 0;      ///< sent (left the ring), or received (put in the ring)
  std::uint64_t batches = 0;       ///< MPI data messages
  std::uint32_t max_in_flight = 0; ///< sender: most messages sent and not yet credited back
  std::uint32_t credits = 0;       ///< the receiver's grant when the link opened
  std::uint64_t credit_frames = 0; ///< receiver: credit frames sent after that grant
};

namespace detail {
class remote_end;
}

/// The sending end of link `link` (a number both ranks agree on, below 16,384) to rank `to`.
class remote_sender {
public:
  remote_sender(world& w, std::shared_ptr<ring_buffer> from, int to, int link, remote_options options = {});
  template <class T>
  remote_sender(world& w, const ring<T>& from, int to, int link, remote_options options = {})
      : remote_sender(w, from.shared_buffer(), to, link, options) {}
  ~remote_sender();
  remote_sender(const remote_sender&) = delete;
  remote_sender& operator=(const remote_sender&) = delete;
  /// Returns once the end of the stream was sent; throws the link's failure, or errc::timeout.
  void wait(std::chrono::nanoseconds timeout);
  /// Ends the link now, telling the peer `why` (its end fails with it, naming this rank); returns
  /// once this end has left (stats() final). wait() then throws the stop.
  void stop(std::string why) noexcept;
  remote_stats stats() const;

private:
  std::unique_ptr<detail::remote_end> end_;
};

/// The receiving end of link `link` from rank `from`.
class remote_receiver {
public:
  remote_receiver(world& w, std::shared_ptr<ring_buffer> into, int from, int link, remote_options options = {});
  template <class T>
  remote_receiver(world& w, const ring<T>& into, int from, int link, remote_options options = {})
      : remote_receiver(w, into.shared_buffer(), from, link, options) {}
  ~remote_receiver();
  remote_receiver(const remote_receiver&) = delete;
  remote_receiver& operator=(const remote_receiver&) = delete;
  /// Returns once the last message was pushed and the ring closed; throws the link's failure.
  void wait(std::chrono::nanoseconds timeout);
  /// As remote_sender::stop.
  void stop(std::string why) noexcept;
  remote_stats stats() const;

private:
  std::unique_ptr<detail::remote_end> end_;
};

} // namespace ringpipe::mpi
