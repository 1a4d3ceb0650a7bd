#pragma once
// The rare side of a handshake whose common side must stay free: a consumer about to sleep with
// no timer asks for a wake, then looks at the ring once more; a producer publishes, then looks
// whether a wake was asked. Each side's store must be ordered before its own load, or both miss
// (a store-load reordering, which x86 allows). A fence on every push would cost each one a full
// barrier; instead the consumer's rare request runs Linux's membarrier, which makes every thread
// of the process pass a full barrier, and the push pays only a compiler barrier
// (std::atomic_signal_fence).

namespace ringpipe::detail {

/// A full memory barrier on every thread of this process, as if each had run one at some point
/// during the call. False where the kernel offers no expedited membarrier (then the caller must
/// not rely on it, and keeps its timer).
bool process_wide_fence() noexcept;
/// Whether process_wide_fence() can succeed here (registered once; no fence issued).
bool process_wide_fence_offered() noexcept;

} // namespace ringpipe::detail
