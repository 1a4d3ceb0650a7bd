#pragma once
// Names the calling thread, so that top -H, perf and gdb tell the runtime's threads apart from
// the application's (otherwise every thread shows the program's name).

#include <pthread.h>

#include <cstddef>
#include <string_view>

namespace ringpipe::detail {

/// Linux shows at most 15 characters of a thread's name: longer names are cut there.
inline void name_this_thread(std::string_view name) noexcept {
#if defined(__linux__)
  char shown[16] = {};
  const std::size_t n = name.size() < sizeof shown - 1 ? name.size() : sizeof shown - 1;
  name.copy(shown, n);
  (void)pthread_setname_np(pthread_self(), shown);
#else
  (void)name;
#endif
}

} // namespace ringpipe::detail
