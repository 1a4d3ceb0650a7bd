#pragma once
// What the pipeline tests share: the test kernel, its host twin, counting sources, an in-order
// checker and the fixture (pipeline_test.cpp: streams and shapes; pipeline_failure_test.cpp:
// failures and backpressure; pipeline_stop_test.cpp: stops; pipeline_validation_test.cpp: refusals).

#include <ringpipe/pipeline.hpp>
#include <test_message.hpp>

#include "device_fixture.hpp"

#include <atomic>
#include <optional>
#include <string>

namespace ringpipe::testing {

inline kernel_spec test_kernel(const char* name) { return {test_stages_source(16), name}; }

// The host twin of test_map: one hop.
inline test_message<16> host_step(const test_message<16>& m) {
  test_message<16> r = m;
  r.check = test_mix(m.check ^ m.seq);
  return r;
}

// A host source of messages 0 .. count-1.
inline auto counting_source(std::uint32_t count) {
  return [count, next = std::uint32_t{0}]() mutable -> std::optional<test_message<16>> {
    if (next == count) return std::nullopt;
    return make_test_message<16>(next++);
  };
}

// A host source of messages 0 .. limit-1 (unending without a limit) that counts what it produced.
inline auto counted_source(std::atomic<std::uint32_t>& generated, std::optional<std::uint32_t> limit = std::nullopt) {
  return [&generated, limit]() -> std::optional<test_message<16>> {
    const auto n = generated.load();
    if (n == limit) return std::nullopt;
    generated.store(n + 1);
    return make_test_message<16>(n);
  };
}

// Checks, message by message, exactly-once in-order delivery after `hops` transformations.
struct checker {
  int hops = 0;
  std::uint32_t expected = 0;
  std::uint32_t errors = 0;
  std::string first_error;
  void operator()(const test_message<16>& m) {
    if (m.seq != expected || m.check != test_check_after(m.seq, hops) || m.payload[0] != m.seq) {
      if (errors++ == 0)
        first_error = "expected seq " + std::to_string(expected) + ", got " + std::to_string(m.seq) +
                      (m.check != test_check_after(m.seq, hops) ? " with a wrong check word" : "");
    }
    expected = m.seq + 1;
  }
};

class PipelineTest : public device_test {};

} // namespace ringpipe::testing
