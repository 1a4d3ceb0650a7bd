#pragma once
// One pipeline over the ranks of an MPI program. Every rank declares the same pipeline and places
// its stages with pipeline::on_rank (cross_rank.hpp); distributed_pipeline runs this rank's part
// and joins each connection between ranks with a remote link (remote.hpp), numbered after the
// connection's index, so the ranks agree on the numbers without exchanging them.
//
//   mpi::world w(argc, argv);
//   pipeline p(rt, {.name = "spread"});
//   auto src = p.add_source<sample>("source", gen);            // every rank declares everything
//   auto k = p.add_kernel<sample, sample>("filter", spec);
//   ...
//   p.on_rank(k, 1);                                            // the rest stays on rank 0
//   mpi::distributed_pipeline(w, p).run(10min);

#include <ringpipe/mpi/remote.hpp>
#include <ringpipe/mpi/stop_report.hpp>
#include <ringpipe/mpi/world.hpp>
#include <ringpipe/pipeline.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace ringpipe::mpi {

struct distributed_options {
  remote_options link;
  /// Connection i uses remote link number first_link + i (the numbers must stay below 16,384 and
  /// clear of the program's own remote links).
  int first_link = 8192;
};

class distributed_pipeline {
public:
  /// Makes `p` this rank's part of the program (pipeline::set_ranks); `p` must outlive this.
  distributed_pipeline(world& w, pipeline& p, distributed_options options = {});
  /// Ends the remote links still running, telling their peers.
  ~distributed_pipeline();
  distributed_pipeline(const distributed_pipeline&) = delete;
  distributed_pipeline& operator=(const distributed_pipeline&) = delete;

  /// Starts this rank's stages, then a remote link per connection to another rank. Refuses, on
  /// every rank alike, a stage placed on a rank the program does not have and a rank with none.
  /// A rank whose part does not start (a kernel that does not build there) throws its error; the
  /// other ranks then stop theirs and throw errc::remote_failed naming that rank, before any
  /// link opens.
  void start();
  /// Returns once this rank's stages have finished and its remote links have ended. Throws the
  /// first failure: a failure on another rank arrives through the link it broke, named there.
  void wait(std::chrono::nanoseconds timeout = std::chrono::minutes(10));
  void run(std::chrono::nanoseconds timeout = std::chrono::minutes(10)) {
    start();
    wait(timeout);
  }
  /// Stops this rank's part at once (its remote links first, telling their peers that the
  /// pipeline was stopped here, then its stages) and reports what was left undelivered on every
  /// rank. Every rank calls it, like an MPI collective: the ranks' counts are exchanged, waiting
  /// at most `timeout` for the others (then the report holds this rank's part only and says so).
  /// A rank still in wait() when a peer stops sees its links fail naming the stopping rank.
  /// Never throws.
  distributed_stop_report stop(std::chrono::nanoseconds timeout = std::chrono::seconds(30)) noexcept;
  /// This rank's connections to other ranks (rings set after start()).
  const std::vector<cross_rank_link>& links() const noexcept { return links_; }
  /// Per connection, in the order of links(); zeros before start().
  std::vector<remote_stats> link_stats() const;
  /// The plan of this rank's part, then one line per connection to another rank.
  std::string plan() const;
  /// The whole pipeline as one Graphviz graph: every rank's part in a box of its own (as
  /// pipeline::dot() draws it) and a bold edge per remote link with the messages it carried.
  /// Every rank calls it, like an MPI collective, and gets the same text.
  std::string dot(std::chrono::nanoseconds timeout = std::chrono::seconds(30));

private:
  struct link_end;
  int started_everywhere(bool failed_here);
  void exchange_counts(distributed_stop_report& report, std::chrono::steady_clock::time_point deadline);
  world& world_;
  pipeline& pipeline_;
  distributed_options options_;
  std::vector<cross_rank_link> links_;
  std::vector<std::unique_ptr<link_end>> ends_;
};

} // namespace ringpipe::mpi
