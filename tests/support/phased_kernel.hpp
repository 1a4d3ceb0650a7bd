#pragma once
// The phased kernel of tests/cl/test_phases.cl as barrier tests and ringpipe-bench use it: its
// shared counters in fine-grained SVM, a kernel with its arguments set (the barrier binds
// argument 0, its seat), and a host participant that does what the kernel does.

#include <ringpipe/barrier.hpp>
#include <ringpipe/kernel.hpp>

#include "test_message.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace ringpipe::testing {

inline constexpr std::uint32_t never_fail = 0xffffffffu;

/// Phases of a barrier whose two kernels spin on CPU devices, and how long to wait for them: sized
/// for a machine that gives the two one core between them (a loaded one, or a test beside them),
/// where each phase waits for a time slice: 20,000 phases took 23 s on one core, 0.1 s on two.
/// (A million phases ran past 60 s when CI's two cores were taken.)
inline constexpr std::uint32_t spinning_phases = 20'000;
inline constexpr std::chrono::seconds spinning_wait{150};

// done[] of test_phases, its error count and the completions' count, in fine-grained SVM with
// atomics.
class shared_counters {
public:
  shared_counters(const device& dev, std::size_t n) : context_(dev.context()()), n_(n) {
    words_ = static_cast<std::uint32_t*>(
        clSVMAlloc(context_, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS, (n + 2) * 4, 64));
    if (words_ == nullptr) throw std::runtime_error("clSVMAlloc of the phase counters failed");
    for (std::size_t i = 0; i < n + 2; ++i)
      words_[i] = 0;
  }
  ~shared_counters() { clSVMFree(context_, words_); }
  shared_counters(const shared_counters&) = delete;
  shared_counters& operator=(const shared_counters&) = delete;
  std::atomic_ref<std::uint32_t> operator[](std::size_t i) { return std::atomic_ref<std::uint32_t>(words_[i]); }
  std::uint32_t errors() { return (*this)[n_].load(); }
  /// What a completion function counts phases in (test_phases reads it with `completions`).
  std::atomic_ref<std::uint32_t> completed() { return (*this)[n_ + 1]; }
  std::uint32_t* data() { return words_; }

private:
  cl_context context_;
  std::size_t n_;
  std::uint32_t* words_;
};

using phased_kernel = ring_kernel<no_message, no_message>;

inline std::unique_ptr<phased_kernel> make_phased_kernel(runtime& rt, const device& dev, shared_counters& done,
                                                         std::uint32_t me, std::uint32_t participants,
                                                         std::uint32_t phases, std::uint32_t fail_at = never_fail,
                                                         kernel_options options = {}, bool completions = false) {
  auto k = std::make_unique<phased_kernel>(rt, dev, kernel_spec(test_phases_source(), "test_phases"), options);
  k->set_arg_svm(1, done.data());
  k->set_arg(2, me);
  k->set_arg(3, participants);
  k->set_arg(4, phases);
  k->set_arg(5, fail_at);
  k->set_arg(6, static_cast<std::uint32_t>(completions ? 1 : 0));
  return k;
}

/// test_phases_stepped (a step on the device at every barrier point) as participant `me` of `participants`.
inline std::unique_ptr<phased_kernel> make_stepped_kernel(runtime& rt, const device& dev, shared_counters& done,
                                                          std::uint32_t me, std::uint32_t participants,
                                                          std::uint32_t phases) {
  auto k = std::make_unique<phased_kernel>(rt, dev, kernel_spec(test_phases_source(), "test_phases_stepped"));
  k->set_arg_svm(1, done.data());
  k->set_arg(2, me);
  k->set_arg(3, participants);
  k->set_arg(4, phases);
  return k;
}

/// The first two PoCL devices with fine-grained SVM and SVM atomics (null where there are fewer).
inline std::pair<const device*, const device*> two_pocl_devices(const topology& topo) {
  const device* a = nullptr;
  const device* b = nullptr;
  for (const auto& d : topo.devices()) {
    if (d.info().platform.find("Portable Computing Language") == std::string::npos || !d.info().svm.fine_buffer ||
        !d.info().svm.atomics)
      continue;
    (a == nullptr ? a : b) = &d;
    if (b != nullptr) break;
  }
  return {a, b};
}

// A host participant doing what test_phases does.
inline void host_phases(barrier& b, std::size_t me, shared_counters& done, std::uint32_t participants,
                        std::uint32_t phases, bool completions = false) {
  for (std::uint32_t k = 0; k < phases; ++k) {
    done[me].store(k + 1);
    for (std::uint32_t o = 0; o < participants; ++o)
      if (const auto d = done[o].load(); d < k || d > k + 1) done[participants].fetch_add(1);
    b.arrive_and_wait(me);
    for (std::uint32_t o = 0; o < participants; ++o)
      if (done[o].load() < k + 1) done[participants].fetch_add(1);
    if (completions && done.completed().load() != k + 1) done[participants].fetch_add(1);
  }
}

} // namespace ringpipe::testing
