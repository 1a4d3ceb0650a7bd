// What both ends of a remote link share, and the public ends that own them.

#include "remote_end.hpp"

#include <ringpipe/error.hpp>

namespace ringpipe::mpi {
namespace detail {

remote_end::remote_end(world& w, std::shared_ptr<ring_buffer> ring, int peer, int link, remote_options o, bool sending)
    : world_(w), io_(w, peer, link, o.timeout, [this] { return stopping() || ring_->cancelled(); }),
      ring_(std::move(ring)), options_(std::move(o)), sending_(sending) {
  if (link < 0 || link >= max_links)
    throw error(errc::invalid_argument,
                "remote link " + std::to_string(link) + ": link numbers are 0 to " + std::to_string(max_links - 1));
  if (peer < 0 || peer >= w.size() || peer == w.rank())
    throw error(errc::invalid_argument,
                label() + ": rank " + std::to_string(peer) + " is not another rank of " + std::to_string(w.size()));
  if (options_.batch == 0) throw error(errc::invalid_argument, label() + ": remote_options::batch is 0");
  io_.hold_memory(ring_); // data frames go from and into its slots
}

void remote_end::start() { world_.links().add(*this); }

void remote_end::halt(std::string why) noexcept {
  std::unique_lock lock(mutex_);
  if (halt_reason_.empty()) halt_reason_ = std::move(why);
  stop_.store(true, std::memory_order_release);
  changed_.wait(lock, [&] { return retired_; });
}

void remote_end::wait(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return done_; }))
    throw error(errc::timeout, label() + ": not finished within " + std::to_string(timeout.count() / 1000000) + " ms");
  if (failure_) std::rethrow_exception(failure_);
}

remote_stats remote_end::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string remote_end::label() const {
  const auto me = std::to_string(io_.self()), peer = std::to_string(io_.peer());
  return "remote link " + std::to_string(io_.link()) + " (rank " + (sending_ ? me : peer) + " -> rank " +
         (sending_ ? peer : me) + ", ring '" + ring_->name() + "')";
}

bool remote_end::turn() noexcept {
  if (phase_ == phase::ended) return false;
  try {
    if (phase_ != phase::closing) return stream_turn();
    // The last sends: a done or an abort (never failing: the peer may be gone), a done that the
    // peer does not take in time fails the stream.
    const bool moved = io_.test_sends();
    if (!io_.sends_done()) return moved;
    {
      std::lock_guard lock(mutex_);
      done_ = true;
      failure_ = result_;
      stats_.messages = count_; // a frame partly pushed into the ring included
    }
    changed_.notify_all();
    phase_ = phase::ended;
    return true;
  } catch (const error& e) {
    failed(std::current_exception(), e.what());
  } catch (const std::exception& e) {
    failed(std::make_exception_ptr(error(errc::remote_failed, label() + ": " + e.what())), e.what());
  }
  return true;
}

void remote_end::failed(const std::exception_ptr& e, const std::string& what) noexcept {
  // A send or receive abandoned because the ring was cancelled or the link destroyed: the cause
  // says more than the abandonment.
  if (const auto cause = local_cause(); !cause.empty() && !told_ && !peer_gave_up_) {
    tell_peer(cause);
    close(std::make_exception_ptr(error(errc::remote_failed, label() + ": " + cause)));
    return;
  }
  tell_peer(what);
  close(e);
}

void remote_end::close(const std::exception_ptr& failure) {
  if (failure) {
    io_.abandon_transfers();
    if (!result_) result_ = failure;
    // The ring's other side (a pipeline's outlet or inlet) must not wait for a link that is gone.
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& x) {
      ring_->cancel(x.what());
    }
  }
  phase_ = phase::closing;
}

void remote_end::retired() noexcept {
  // Notified under the lock: the owner may destroy this end as soon as the lock is free.
  std::lock_guard lock(mutex_);
  retired_ = true;
  changed_.notify_all();
}

std::string remote_end::local_cause() const {
  if (ring_->cancelled())
    return "its ring on rank " + std::to_string(io_.self()) + " was cancelled: " + ring_->cancel_reason();
  if (stopping()) return halted();
  return {};
}

std::string remote_end::halted() const {
  {
    std::lock_guard lock(mutex_);
    if (!halt_reason_.empty()) return halt_reason_;
  }
  return "the link was destroyed on rank " + std::to_string(io_.self()) + " before its stream ended";
}

// A failure of this end's own (a send it abandoned, a peer gone silent, a frame it could not
// read) is told to the peer, which may be waiting for the rest of a frame; not one the peer
// told this end of, nor one already told.
void remote_end::tell_peer(const std::string& why) noexcept {
  if (told_ || peer_gave_up_) return;
  told_ = true;
  io_.send_text(frame_kind::abort, why, count_, sending_);
}

void remote_end::abort_link(const std::string& why) {
  tell_peer(why);
  fail(errc::remote_failed, why);
}

void remote_end::idle_checks() {
  // A cancelled ring first: its reason (a pipeline's failure) says more than the destruction
  // that often follows it at once.
  if (ring_->cancelled())
    abort_link("its ring on rank " + std::to_string(io_.self()) + " was cancelled: " + ring_->cancel_reason());
  if (stopping()) abort_link(halted());
  io_.heartbeat_if_due(sending_);
  if (io_.silent_for() > options_.timeout)
    fail(errc::remote_failed, "rank " + std::to_string(io_.peer()) + " sent nothing for " +
                                  std::to_string(io_.silent_for().count() / 1000000) +
                                  " ms (it failed, stopped or is stuck)");
}

bool remote_end::common(const frame& f) {
  if (f.kind == frame_kind::heartbeat) return true;
  if (f.kind != frame_kind::abort) return false;
  peer_gave_up_ = true;
  const std::string why = "rank " + std::to_string(io_.peer()) + " gave up the link: " + f.text();
  if (sending_) ring_->cancel(label() + ": " + why); // the producing pipeline stops too
  fail(errc::remote_failed, why);
}

} // namespace detail

remote_sender::remote_sender(world& w, std::shared_ptr<ring_buffer> from, int to, int link, remote_options options)
    : end_(detail::make_sending_end(w, std::move(from), to, link, std::move(options))) {
  end_->start();
}
remote_sender::~remote_sender() { end_->halt({}); }
void remote_sender::wait(std::chrono::nanoseconds timeout) { end_->wait(timeout); }
void remote_sender::stop(std::string why) noexcept { end_->halt(std::move(why)); }
remote_stats remote_sender::stats() const { return end_->stats(); }

remote_receiver::remote_receiver(world& w, std::shared_ptr<ring_buffer> into, int from, int link,
                                 remote_options options)
    : end_(detail::make_receiving_end(w, std::move(into), from, link, std::move(options))) {
  end_->start();
}
remote_receiver::~remote_receiver() { end_->halt({}); }
void remote_receiver::wait(std::chrono::nanoseconds timeout) { end_->wait(timeout); }
void remote_receiver::stop(std::string why) noexcept { end_->halt(std::move(why)); }
remote_stats remote_receiver::stats() const { return end_->stats(); }

} // namespace ringpipe::mpi
