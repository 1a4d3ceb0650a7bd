#pragma once
// Whether a resident kernel and the host can pass messages through memory the host keeps mapped
// while the kernel runs: what a ring kernel needs on devices without fine-grained SVM with atomics
// (NVIDIA's OpenCL offers coarse-grained SVM only). The OpenCL specification leaves host access
// to a buffer in use by a kernel undefined, so only a measurement says whether a driver allows it.
// One work-item echoes the host's messages through two rings in that memory; both sides check
// every word of every message and count what they saw stale (the slot's previous message) or torn
// (anything else), and the host times each round trip.

#include <ringpipe/device.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringpipe {

/// Where the litmus's rings live.
enum class mapped_memory {
  alloc_host_ptr, ///< a CL_MEM_ALLOC_HOST_PTR buffer, mapped once before the launch
  use_host_ptr,   ///< a CL_MEM_USE_HOST_PTR buffer over page-aligned host memory
  coarse_svm,     ///< coarse-grained buffer SVM, written by the host without a map
};
std::string_view to_string(mapped_memory m) noexcept;

/// How the kernel orders its stores before it publishes a head.
enum class device_fence {
  memory_fence, ///< mem_fence(CLK_GLOBAL_MEM_FENCE)
  system_fence, ///< NVIDIA's membar.sys (inline PTX): orders stores as the host sees them
};
std::string_view to_string(device_fence f) noexcept;

struct litmus_options {
  mapped_memory memory = mapped_memory::alloc_host_ptr;
  device_fence fence = device_fence::memory_fence;
  std::uint32_t messages = 100'000;
  /// Slots per ring; 1 makes it a ping-pong (each round trip timed alone).
  std::uint32_t capacity = 256;
  /// How long either side waits without progress before it gives up.
  std::chrono::milliseconds patience{2000};
  /// Polls the kernel makes in one wait before it gives up (it has no clock). 0: 2^30 on CPU
  /// devices (seconds: a host thread preempted on a loaded machine must not look like a lost
  /// write; where writes do cross, the host's stop word ends the kernel at once), 2^24 elsewhere
  /// (a few seconds on a GPU polling its own memory).
  std::uint32_t device_patience = 0;
  /// Test hook: the kernel leaves one word of every n-th echo wrong (0: never).
  std::uint32_t tear_every = 0;
};

struct litmus_result {
  /// Why the litmus did not run (the device lacks the memory kind or the fence); empty if it ran.
  std::string not_run;
  std::uint64_t sent = 0;
  std::uint64_t device_received = 0; ///< messages the kernel read
  std::uint64_t host_received = 0;   ///< echoes the host read
  std::uint64_t device_stale = 0, device_torn = 0;
  std::uint64_t host_stale = 0, host_torn = 0;
  bool device_gave_up = false; ///< the kernel waited `device_patience` polls for a write
  bool host_gave_up = false;   ///< the host waited `patience` for an echo
  // What tells a failure's cause apart: which way writes did not cross, and whether it ran at all.
  std::uint64_t device_polls = 0;        ///< reads of a head or tail that found no change
  std::uint32_t device_highest_head = 0; ///< the highest host head the kernel read (0: none seen)
  bool device_saw_stop = false;          ///< the kernel read the host's stop word
  bool host_saw_start = false;           ///< the host read the word the kernel writes first
  std::string launch_status_at_start;    ///< its status when the host began (after waiting up to
                                         ///< `patience` for it to run, polling every millisecond)
  double launch_wait_ms = 0;             ///< how long the host waited for that
  std::string launch_status_at_stop;     ///< the launch's event status when the host stopped
  double seconds = 0;
  std::vector<std::uint32_t> round_trip_ns; ///< with capacity 1: every round trip

  /// Every message crossed both ways, every word as written.
  bool holds() const noexcept;
  double messages_per_second() const noexcept { return seconds > 0 ? double(host_received) / seconds : 0; }
  /// The p-th percentile (0..100) of round_trip_ns in microseconds; 0 without samples.
  double round_trip_us(double p) const;
  /// One line: counts, gave-ups, rate and (ping-pong) round trips.
  std::string summary() const;
};

/// Runs the litmus on `dev`. Never hangs: both sides give up after their patience, and a kernel
/// that outlives the host's wait by more than 30 s fails with errc::timeout.
litmus_result run_mapped_litmus(const device& dev, const litmus_options& options);

} // namespace ringpipe
