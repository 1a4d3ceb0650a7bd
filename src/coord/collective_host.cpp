// Combines on the calling thread: where every array lies in shared memory of CPU devices the host
// reads and writes them in place, which costs far less than a kernel launch for small arrays (a
// launch on a CPU device takes tens of microseconds; a 4 KiB combine, well under one).
#include "collective_steps.hpp"

namespace ringpipe::detail {

bool host_reaches(const std::vector<array_bytes>& arrays, const element_op& op) {
  if (!op.on_host) return false;
  for (const auto& a : arrays)
    if (a.memory() != array_memory::shared || a.dev().info().type != device_type::cpu) return false;
  return true;
}

void combine_on_host(const combine_task& task, const element_op& op) {
  const std::size_t n = task.acc.size_bytes() / op.element;
  for (const auto& s : task.sources)
    op.on_host(task.acc.data(), s.data(), n);
}

} // namespace ringpipe::detail
