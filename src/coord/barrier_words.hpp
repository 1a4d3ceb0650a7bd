#pragma once
// The barrier's shared words, in the layout of cl/ringpipe/barrier.clh: a header of three 64-byte
// lines (the phase in progress, the arrivals in it, what the host sets) and one 64-byte seat per
// participant (the phase it last arrived at plus one, its position, its counters). Host
// participants and ring kernels run the same protocol on them: host memory when every participant
// is on the host, fine-grained SVM with atomics of the kernels' context otherwise.

#include <ringpipe/opencl.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ringpipe::detail {

using barrier_word = std::atomic<std::uint32_t>;
static_assert(sizeof(barrier_word) == 4 && barrier_word::is_always_lock_free);

struct barrier_header {
  alignas(64) barrier_word phase{0};   // the phase in progress: every phase before it is released
  alignas(64) barrier_word arrived{0}; // participants arrived in the phase in progress
  alignas(64) barrier_word failed{0};  // non-zero once the barrier failed
  barrier_word host_completes{0};      // a completion function runs on the host before each release
  barrier_word size{0};
  barrier_word device_step{0}; // a kernel completes phases on the device: its seat's index plus one
};
static_assert(offsetof(barrier_header, arrived) == 64 && offsetof(barrier_header, failed) == 128);
static_assert(offsetof(barrier_header, size) == 136 && offsetof(barrier_header, device_step) == 140 &&
              sizeof(barrier_header) == 192);

struct alignas(64) barrier_seat {
  barrier_word arrival{0}; // the phase last arrived at, plus one
  barrier_word index{0};
  barrier_word arrivals{0};
  barrier_word waits{0};
  barrier_word last{0}; // phases in which this participant arrived last
};
static_assert(sizeof(barrier_seat) == 64 && offsetof(barrier_seat, last) == 16);

/// Owns the words: host memory, or fine-grained SVM with atomics of `svm_context`.
class barrier_words {
public:
  barrier_words(std::size_t participants, cl_context svm_context, const std::string& barrier_name);
  ~barrier_words();
  barrier_words(const barrier_words&) = delete;
  barrier_words& operator=(const barrier_words&) = delete;

  barrier_header& header() noexcept { return *static_cast<barrier_header*>(memory_); }
  barrier_seat& seat(std::size_t i) noexcept { return seats_[i]; }

private:
  void* memory_ = nullptr;
  barrier_seat* seats_ = nullptr;
  cl_context context_ = nullptr; // retained while the SVM lives
};

} // namespace ringpipe::detail
