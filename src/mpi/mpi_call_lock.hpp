#pragma once
// The world's lock for ringpipe's own MPI calls that test and probe: nonblocking, tried again on
// later turns by threads that pace themselves (the link engine, complete_by). Open MPI's
// yield_when_idle (its default where ranks outnumber cores, or OMPI_MCA_mpi_yield_when_idle=1)
// makes each such call that finds nothing new also give up the core, about 1 us on a 2-core VM
// and eight of them per round trip of a small message (one way 6-8 us instead of 3). So it is off
// while ringpipe holds the lock, and back as it was once it lets go: the application's own calls,
// blocking ones included, keep it. Other MPIs have no such switch; nothing changes there.

#include <ringpipe/mpi/world.hpp>

#include <dlfcn.h>

#include <mutex>

namespace ringpipe::mpi::detail {

class mpi_call_lock {
public:
  explicit mpi_call_lock(world& w) : lock_(w.lock()) {
    if (auto* set = yield_switch()) was_ = set(false);
  }
  ~mpi_call_lock() {
    if (auto* set = yield_switch(); set != nullptr && was_) set(true);
  }
  mpi_call_lock(const mpi_call_lock&) = delete;
  mpi_call_lock& operator=(const mpi_call_lock&) = delete;

  /// Open MPI's opal_progress_set_yield_when_idle (it returns the setting it replaced), or null.
  using yield_setter = bool (*)(bool);
  static yield_setter yield_switch() noexcept {
    static const auto set = reinterpret_cast<yield_setter>(dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle"));
    return set;
  }

private:
  std::lock_guard<std::mutex> lock_;
  bool was_ = false;
};

} // namespace ringpipe::mpi::detail
