// Proves the installed headers and library are usable: discovers devices and pushes through a ring.
#include <ringpipe/ring.hpp>
#include <ringpipe/topology.hpp>

#include <cstdio>

int main() {
  const auto topo = ringpipe::topology::discover();
  ringpipe::ring<int> r(4);
  if (!r.try_push(42)) return 1;
  int v = 0;
  if (!r.try_pop(v) || v != 42) return 1;
  std::printf("consumer: %zu device(s), first '%s'\n", topo.size(), topo[0].name().c_str());
  return 0;
}
