#pragma once
// The MPI world a ringpipe program runs in (component ringpipe::mpi): MPI initialised once per
// process, this rank and the number of ranks, finalised when the world ends. ringpipe makes its
// MPI calls one at a time under the world's lock (so MPI_THREAD_SERIALIZED suffices); a program
// that makes MPI calls of its own while remote links run takes the same lock.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace ringpipe::mpi {

namespace detail {
struct link_book;
class link_engine;
} // namespace detail

class world {
public:
  /// Initialises MPI (MPI_Init_thread); refused if MPI is already initialised, or cannot give
  /// at least MPI_THREAD_SERIALIZED (remote links run on threads of their own).
  world(int& argc, char**& argv);
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// "rank 1 of 3 on host-name".
  std::string describe() const;
  /// Held around every MPI call ringpipe makes; a program that makes MPI calls of its own beside
  /// running links holds it too. Never wait on a ring while holding it: a waiting thread may take
  /// the link thread's turns, which take this lock.
  std::mutex& lock() noexcept { return lock_; }
  /// Ends every rank at once (MPI_Abort), after printing `why` on this rank's stderr: for a
  /// failure the other ranks cannot learn of by themselves.
  [[noreturn]] void abort(std::string_view why, int code = 1) noexcept;
  /// The remote links' records (for remote.cpp): how often each link number was opened with each
  /// peer, and frames that came before their link was opened here. Guarded by lock().
  detail::link_book& link_book() noexcept { return *book_; }
  /// The thread that moves every remote link's frames on this rank (for remote.cpp).
  detail::link_engine& links() noexcept { return *engine_; }

private:
  int rank_ = 0, size_ = 1;
  std::string host_;
  std::mutex lock_;
  std::unique_ptr<detail::link_book> book_;
  std::unique_ptr<detail::link_engine> engine_; // its thread starts with the first link
};

} // namespace ringpipe::mpi
