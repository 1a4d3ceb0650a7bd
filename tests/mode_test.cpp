// The choice of a ring kernel's transport and mode, as a table: every combination of device
// capability, ring memory, budget and forced mode, with what the runtime must pick or refuse.

#include "../src/kernel/mode_choice.hpp"

#include <gtest/gtest.h>

#include <optional>

using namespace ringpipe;
using namespace ringpipe::detail;

namespace {

struct row {
  const char* what;
  mode_facts facts;
  kernel_transport transport;
  kernel_mode mode;
  mode_refusal refusal;
};

constexpr auto shm = kernel_transport::shared_memory;
constexpr auto mir = kernel_transport::mirrored;
constexpr auto P = kernel_mode::persistent;
constexpr auto K = kernel_mode::parked;
constexpr auto B = kernel_mode::batched;
constexpr auto ok = mode_refusal::none;

// facts: {device shares memory, rings in its SVM, supports persistent, supports parked, budget
// leaves a worker, forced, gated}
const row table[] = {
    {"PoCL, rings in SVM, budget free", {true, true, true, true, true, {}, false}, shm, P, ok},
    {"PoCL, rings in SVM, budget taken", {true, true, true, true, false, {}, false}, shm, K, ok},
    {"PoCL, rings in host memory", {true, false, true, true, true, {}, false}, mir, B, ok},
    {"rusticl (no SVM)", {false, false, false, false, false, {}, false}, mir, B, ok},
    {"coarse-grained SVM GPU, rings claimed in SVM", {false, true, false, false, true, {}, false}, mir, B, ok},
    {"forced persistent on PoCL", {true, true, true, true, false, P, false}, shm, P, ok},
    {"forced parked on PoCL", {true, true, true, true, true, K, false}, shm, K, ok},
    {"forced batched on PoCL", {true, true, true, true, true, B, false}, shm, B, ok},
    {"forced batched on rusticl", {false, false, false, false, false, B, false}, mir, B, ok},
    {"forced persistent on rusticl",
     {false, false, false, false, false, P, false},
     mir,
     P,
     mode_refusal::device_cannot},
    {"forced parked on rusticl", {false, false, false, false, false, K, false}, mir, K, mode_refusal::device_cannot},
    {"forced persistent, rings in host memory",
     {true, false, true, true, true, P, false},
     mir,
     P,
     mode_refusal::rings_not_shared},
    {"forced parked, rings in host memory",
     {true, false, true, true, true, K, false},
     mir,
     K,
     mode_refusal::rings_not_shared},
    {"gated on PoCL (a barrier through the host), rings in SVM", {true, true, true, true, true, {}, true}, mir, B, ok},
    {"gated on rusticl", {false, false, false, false, false, {}, true}, mir, B, ok},
};

TEST(ModeChoice, EveryRowOfTheTable) {
  for (const auto& r : table) {
    const auto c = choose_mode(r.facts);
    EXPECT_EQ(c.transport, r.transport) << r.what;
    EXPECT_EQ(c.mode, r.mode) << r.what;
    EXPECT_EQ(c.refusal, r.refusal) << r.what;
  }
}

} // namespace
