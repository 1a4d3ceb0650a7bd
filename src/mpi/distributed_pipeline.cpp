// This rank's part of a pipeline declared on every rank, joined to the others by remote links.

#include "../core/text.hpp"
#include "request_wait.hpp"

#include <ringpipe/error.hpp>
#include <ringpipe/mpi/distributed_pipeline.hpp>
#include <ringpipe/mpi/rank_collectives.hpp>
#include <ringpipe/runtime.hpp>

#include <algorithm>
#include <memory>
#include <variant>

namespace ringpipe::mpi {

struct distributed_pipeline::link_end {
  std::variant<remote_sender, remote_receiver> end;
  template <class End, class... Args>
  explicit link_end(std::in_place_type_t<End> t, Args&&... args) : end(t, std::forward<Args>(args)...) {}
  void wait(std::chrono::nanoseconds timeout) {
    std::visit([&](auto& e) { e.wait(timeout); }, end);
  }
  void stop(const std::string& why) noexcept {
    std::visit([&](auto& e) { e.stop(why); }, end);
  }
  remote_stats stats() const {
    return std::visit([](const auto& e) { return e.stats(); }, end);
  }
};

distributed_pipeline::distributed_pipeline(world& w, pipeline& p, distributed_options options)
    : world_(w), pipeline_(p), options_(std::move(options)) {
  if (!p.has_any_rank()) {
    p.set_ranks(w.rank(), w.size());
    return;
  }
  // Stages on any_rank are shared out by the ranks' devices: every rank learns every rank's count.
  std::vector<std::uint64_t> devices(static_cast<std::size_t>(w.size()));
  devices[static_cast<std::size_t>(w.rank())] = p.rt().devices().size();
  if (!detail::all_reduce_by(w, devices, MPI_SUM, std::chrono::steady_clock::now() + options_.link.timeout))
    throw error(errc::timeout, "pipeline '" + p.name() + "' on rank " + std::to_string(w.rank()) +
                                   ": not every rank said how many devices it has (for stages on any_rank) within " +
                                   std::to_string(options_.link.timeout.count() / 1000000) + " ms");
  p.set_ranks(w.rank(), w.size(), std::vector<double>(devices.begin(), devices.end()));
}

distributed_pipeline::~distributed_pipeline() = default;

void distributed_pipeline::start() {
  if (!ends_.empty()) throw error(errc::invalid_pipeline, "pipeline '" + pipeline_.name() + "' was already started");
  const auto planned = pipeline_.cross_rank_links(); // refuses a bad placement before anything starts
  if (!planned.empty() && options_.first_link + static_cast<int>(planned.back().index) >= 16384)
    throw error(errc::invalid_argument, "pipeline '" + pipeline_.name() + "': remote link numbers from " +
                                            std::to_string(options_.first_link) + " for " +
                                            std::to_string(planned.back().index + 1) +
                                            " connections pass 16,383 (distributed_options::first_link)");
  std::exception_ptr failed;
  try {
    pipeline_.start();
  } catch (...) {
    failed = std::current_exception();
  }
  // Every rank says whether its part started before any link opens: a rank whose kernels did not
  // build would otherwise be known to the others only by its links' silence, after the timeout.
  int down = -1;
  try {
    down = started_everywhere(failed != nullptr);
  } catch (...) { // not every rank reached the exchange: this rank's own error says more
    if (failed) std::rethrow_exception(failed);
    (void)pipeline_.stop();
    throw;
  }
  if (failed) std::rethrow_exception(failed);
  if (down >= 0) {
    (void)pipeline_.stop();
    throw error(errc::remote_failed, "pipeline '" + pipeline_.name() + "' did not start on rank " +
                                         std::to_string(down) + " (its error is reported there); rank " +
                                         std::to_string(world_.rank()) + " stopped its part");
  }
  links_ = pipeline_.cross_rank_links();
  for (const auto& l : links_) {
    const int number = options_.first_link + static_cast<int>(l.index);
    auto o = options_.link;
    o.ring_moved = l.wake_beside; // the stage beside the port sleeps while its ring is empty or full
    if (l.sending)
      ends_.push_back(std::make_unique<link_end>(std::in_place_type<remote_sender>, world_, l.ring, l.to_rank, number,
                                                 std::move(o)));
    else
      ends_.push_back(std::make_unique<link_end>(std::in_place_type<remote_receiver>, world_, l.ring, l.from_rank,
                                                 number, std::move(o)));
  }
}

// One all-reduce (MAX) of rank + 1 for a rank that failed to start, 0 for one that started: the
// failed rank (the highest, if several), or -1.
int distributed_pipeline::started_everywhere(bool failed_here) {
  std::vector<std::uint64_t> failed{failed_here ? static_cast<std::uint64_t>(world_.rank()) + 1 : 0};
  if (!detail::all_reduce_by(world_, failed, MPI_MAX, std::chrono::steady_clock::now() + options_.link.timeout))
    throw error(errc::timeout, "pipeline '" + pipeline_.name() + "' on rank " + std::to_string(world_.rank()) +
                                   ": not every rank started its part within " +
                                   std::to_string(options_.link.timeout.count() / 1000000) + " ms");
  return static_cast<int>(failed[0]) - 1;
}

void distributed_pipeline::wait(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // The pipeline first: a link that fails cancels its port, which fails the pipeline with the
  // link's reason; a pipeline that fails cancels its ports, which ends their links.
  pipeline_.wait(timeout);
  for (auto& e : ends_)
    e->wait(std::max(std::chrono::nanoseconds(0), deadline - std::chrono::steady_clock::now()));
}

distributed_stop_report distributed_pipeline::stop(std::chrono::nanoseconds timeout) noexcept {
  distributed_stop_report report;
  const std::string why = "pipeline '" + pipeline_.name() + "' was stopped on rank " + std::to_string(world_.rank());
  // The links first: once their threads have left, no message moves between a ring and MPI while
  // the rings are counted.
  for (auto& e : ends_)
    e->stop(why);
  report.here = pipeline_.stop();
  try {
    exchange_counts(report, std::chrono::steady_clock::now() + timeout);
  } catch (const std::exception& e) {
    report.missing = e.what();
  }
  return report;
}

// Every rank's totals and every connection's counts, in two all-reduces: the number of
// connections (MAX), then per connection [sent, received, from rank + 1, to rank + 1] and per
// rank [undelivered, lost] (SUM: each entry comes from one rank only).
void distributed_pipeline::exchange_counts(distributed_stop_report& report,
                                           std::chrono::steady_clock::time_point deadline) {
  const auto late = [&] { report.missing = "not every rank called distributed_pipeline::stop before its timeout"; };
  std::vector<std::uint64_t> connections{0};
  for (const auto& l : links_)
    connections[0] = std::max<std::uint64_t>(connections[0], l.index + 1);
  if (!detail::all_reduce_by(world_, connections, MPI_MAX, deadline)) return late();
  const std::size_t c = connections[0], ranks = static_cast<std::size_t>(world_.size());
  std::vector<std::uint64_t> counts(4 * c + 2 * ranks);
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const auto& l = links_[i];
    const std::uint64_t moved = ends_.size() > i ? ends_[i]->stats().messages : 0;
    counts[4 * l.index + (l.sending ? 0 : 1)] = moved;
    counts[4 * l.index + (l.sending ? 2 : 3)] = static_cast<std::uint64_t>(world_.rank()) + 1;
  }
  const std::size_t me = 4 * c + 2 * static_cast<std::size_t>(world_.rank());
  counts[me] = report.here.undelivered;
  counts[me + 1] = report.here.lost;
  if (!detail::all_reduce_by(world_, counts, MPI_SUM, deadline)) return late();
  detail::settle_counts(counts, c, ranks, report);
}

std::string distributed_pipeline::dot(std::chrono::nanoseconds timeout) {
  const auto id = [](int rank, const std::string& node) { // a node id as dot_part writes it, quoted
    return ringpipe::detail::dot_quoted("r" + std::to_string(rank) + "/" + node);
  };
  std::string part = pipeline_.dot_part("r" + std::to_string(world_.rank()) + "/");
  const auto stats = link_stats();
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const auto& l = links_[i];
    if (!l.sending) continue; // each link drawn once, by its sender
    const std::string receiving_port = l.from + "@rank" + std::to_string(l.from_rank) + "->" + l.to;
    part += "  " + id(l.from_rank, l.port) + " -> " + id(l.to_rank, receiving_port) + " [label=\"remote link " +
            std::to_string(options_.first_link + static_cast<int>(l.index)) + "\\n" +
            ringpipe::detail::amount(stats[i].messages, "msgs") + "\", style=bold, color=\"#7b1fa2\"];\n";
  }
  collective_options o;
  o.name = "pipeline '" + pipeline_.name() + "' graph";
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  std::vector<std::byte> all;
  detail::gather_across_ranks(world_, -1, std::as_bytes(std::span<const char>(part.data(), part.size())),
                              detail::any_size, all, o);
  return pipeline::dot_header(pipeline_.name(),
                              "pipeline '" + pipeline_.name() + "' over " + std::to_string(world_.size()) + " ranks") +
         std::string(reinterpret_cast<const char*>(all.data()), all.size()) + "}\n";
}

std::vector<remote_stats> distributed_pipeline::link_stats() const {
  std::vector<remote_stats> s(links_.size());
  for (std::size_t i = 0; i < ends_.size(); ++i)
    s[i] = ends_[i]->stats();
  return s;
}

std::string distributed_pipeline::plan() const {
  std::string text = world_.describe() + "\n" + pipeline_.plan();
  for (const auto& l : links_)
    text += "remote link " + std::to_string(options_.first_link + static_cast<int>(l.index)) + ": " + l.from +
            " (rank " + std::to_string(l.from_rank) + ") -> " + l.to + " (rank " + std::to_string(l.to_rank) +
            "), through port '" + l.port + "'\n";
  return text;
}

} // namespace ringpipe::mpi
