#pragma once
// What the planner tests share: message types, a program the planner reads but nothing compiles,
// option helpers, the CI machine's topology (PoCL x2 and rusticl, 2 cores) and the fixture
// (planner_test.cpp: validation, placement, fusion, links, budgets; planner_objective_test.cpp:
// objectives).

#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>

#include "support/described_topology.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

// Message types at global scope, as a user's are: errors name them as written.
struct sample {
  std::uint32_t seq;
  float value;
};
struct wide {
  std::uint64_t a, b;
};

namespace ringpipe::testing {

// A program the planner reads (for RINGPIPE_MAP_KERNEL declarations) but nothing compiles.
const char* const map_program = "RINGPIPE_MAP_KERNEL(twice, sample, sample, twice_fn)\n"
                                "RINGPIPE_MAP_KERNEL(clip, sample, sample, clip_fn)\n";
inline kernel_spec map_kernel(const char* name) { return {map_program, name}; }

inline pipeline_options opts(const char* name, bool fuse = true, std::shared_ptr<const placement_policy> policy = {}) {
  pipeline_options o;
  o.name = name;
  o.fuse_kernels = fuse;
  o.placement = std::move(policy);
  return o;
}
inline link_options forced(link_kind kind) {
  link_options o;
  o.kind = kind;
  return o;
}

inline auto no_messages() {
  return []() -> std::optional<sample> { return std::nullopt; };
}

// PoCL x2 (one context, shared SVM, one pool of 2 workers) and rusticl (no SVM): the CI machines.
inline topology ci_topology() { return describe({pocl_cpu("cpu0"), pocl_cpu("cpu1"), rusticl_cpu()}); }

// inlet -> a -> b -> outlet, kernel a on device `da`, b on `db`.
inline void two_kernels(pipeline& p, std::size_t da, std::size_t db) {
  auto in = p.add_inlet<sample>("in");
  auto a = p.add_kernel<sample, sample>("a", map_kernel("twice"), on_device(da));
  auto b = p.add_kernel<sample, sample>("b", map_kernel("twice"), on_device(db));
  auto out = p.add_outlet<sample>("out");
  p.connect(in.out(), a.in());
  p.connect(a.out(), b.in());
  p.connect(b.out(), out.in());
}

// One runtime thread and the CI machine's 2 cores, whatever this host has.
inline runtime_options two_cores() {
  runtime_options o;
  o.threads = 1;
  o.host_cores = 2;
  return o;
}

class PlannerTest : public ::testing::Test {
protected:
  runtime rt{ci_topology(), two_cores()};
};

} // namespace ringpipe::testing
