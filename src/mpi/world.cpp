#include "link_book.hpp"
#include "link_engine.hpp"
#include "link_io.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/world.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ringpipe::mpi {
namespace {
detail::link_book* kept_book = nullptr; // see ~world
} // namespace

world::world(int& argc, char**& argv)
    : book_(std::make_unique<detail::link_book>()), engine_(std::make_unique<detail::link_engine>()) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised != 0) throw error(errc::invalid_argument, "mpi::world: MPI is already initialised in this process");
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw error(errc::invalid_argument, "mpi::world: MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw error(errc::invalid_argument, "mpi::world: this MPI gives thread level " + std::to_string(provided) +
                                            "; remote links need MPI_THREAD_SERIALIZED or better");
  }
  // Errors come back as codes, said in words by ringpipe, instead of ending the process.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<std::size_t>(length));
}

world::~world() {
  engine_.reset(); // no link thread left making MPI calls
  // Transfers failed links left to MPI: a second for them to complete, then MPI keeps the rest
  // and so does the process their memory (freeing it under them is what they were kept from).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (book_->has_orphans.load() && std::chrono::steady_clock::now() < until) {
    detail::link_io::test_orphans(*this);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard guard(lock_);
  if (!book_->orphans.empty()) {
    for (auto& o : book_->orphans)
      for (auto& r : o.requests)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    // The book, with what they use, stays reachable (leak checkers say nothing) and is never
    // destroyed, not even at exit. One world per process: MPI is initialised once.
    kept_book = book_.release();
  }
  MPI_Finalize();
}

std::string world::describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " on " + host_;
}

void world::abort(std::string_view why, int code) noexcept {
  std::fprintf(stderr, "ringpipe: %s: %.*s\n", describe().c_str(), static_cast<int>(why.size()), why.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort(); // MPI_Abort does not return; if it did, nothing else may run
}

} // namespace ringpipe::mpi
