// Totals and text of a stop over several ranks.

#include <ringpipe/mpi/stop_report.hpp>

#include <algorithm>

namespace ringpipe::mpi {

namespace detail {

void settle_counts(std::span<const std::uint64_t> counts, std::size_t connections, std::size_t ranks,
                   distributed_stop_report& report) {
  const std::size_t c = connections;
  report.ranks.assign(ranks, {});
  for (std::size_t r = 0; r < ranks; ++r)
    report.ranks[r] = {counts[4 * c + 2 * r], counts[4 * c + 2 * r + 1]};
  report.in_transit.clear();
  for (std::size_t i = 0; i < c; ++i) {
    const std::uint64_t sent = counts[4 * i], received = counts[4 * i + 1];
    const int from = static_cast<int>(counts[4 * i + 2]) - 1, to = static_cast<int>(counts[4 * i + 3]) - 1;
    if (sent > received) report.in_transit.push_back({i, from, to, sent - received});
    // A send abandoned after the receiver took its messages: they are still in the sender's ring.
    if (received > sent && from >= 0) {
      auto& held = report.ranks[static_cast<std::size_t>(from)].undelivered;
      held -= std::min(held, received - sent);
    }
  }
  report.complete = true;
}

} // namespace detail

std::uint64_t distributed_stop_report::undelivered() const noexcept {
  if (!complete) return here.undelivered;
  std::uint64_t n = 0;
  for (const auto& r : ranks)
    n += r.undelivered;
  for (const auto& t : in_transit)
    n += t.messages;
  return n;
}

std::uint64_t distributed_stop_report::lost() const noexcept {
  if (!complete) return here.lost;
  std::uint64_t n = 0;
  for (const auto& r : ranks)
    n += r.lost;
  return n;
}

std::string distributed_stop_report::text() const {
  if (!complete) return "this rank only (" + missing + "): " + here.text();
  std::string t =
      std::to_string(undelivered()) + " messages undelivered over " + std::to_string(ranks.size()) + " ranks:";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    t += (r == 0 ? " rank " : ", rank ") + std::to_string(r) + ": " + std::to_string(ranks[r].undelivered);
    if (ranks[r].lost != 0) t += " (" + std::to_string(ranks[r].lost) + " lost)";
  }
  std::uint64_t moving = 0;
  for (const auto& x : in_transit)
    moving += x.messages;
  t += "; " + std::to_string(moving) + " in transit between ranks";
  for (const auto& x : in_transit)
    t += (&x == &in_transit.front() ? " (" : ", ") + std::to_string(x.messages) + " from rank " +
         std::to_string(x.from_rank) + " to rank " + std::to_string(x.to_rank);
  if (!in_transit.empty()) t += ")";
  return t + ". Here: " + here.text();
}

} // namespace ringpipe::mpi
