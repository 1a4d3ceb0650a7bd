#pragma once
// What mpi_remote_test's files share: the tests' fixture.

#include "mpi_test_main.hpp"

namespace ringpipe::testing {

class RemoteLink : public OnRanks {};

} // namespace ringpipe::testing
