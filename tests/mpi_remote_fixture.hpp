#pragma once
// What mpi_remote_test's files share: the world both ranks run in and the tests' fixture.

#include <ringpipe/mpi/world.hpp>
#include <ringpipe/runtime.hpp>

#include <gtest/gtest.h>

namespace ringpipe::testing {

/// Set by run_on_ranks before the tests run.
inline mpi::world* remote_world = nullptr;

class RemoteLink : public ::testing::Test {
protected:
  mpi::world& w() { return *remote_world; }
  bool sender() { return w().rank() == 0; }
  static runtime& rt() {
    static runtime r;
    return r;
  }
};

} // namespace ringpipe::testing
