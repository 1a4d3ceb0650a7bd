// The farm's dealer, merger and ledger (farm.hpp).
#include "farm.hpp"

#include "../core/farm_names.hpp"

#include <ringpipe/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace ringpipe::detail {

farm_ledger::farm_ledger(std::size_t replicas) {
  for (std::size_t r = 0; r < replicas; ++r)
    logs_.push_back(std::make_unique<log>());
}

void farm_ledger::given(std::size_t r, std::span<const std::uint64_t> seqs) {
  std::lock_guard lock(logs_[r]->mutex);
  logs_[r]->seqs.insert(logs_[r]->seqs.end(), seqs.begin(), seqs.end());
}

void farm_ledger::take_all(std::size_t r, std::deque<std::uint64_t>& into) {
  std::lock_guard lock(logs_[r]->mutex);
  into.insert(into.end(), logs_[r]->seqs.begin(), logs_[r]->seqs.end());
  logs_[r]->seqs.clear();
}

farm_dealer::farm_dealer(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch,
                         std::shared_ptr<farm_ledger> ledger, farm_options options, std::vector<double> capability,
                         std::vector<std::string> replica_names)
    : host_stage(std::move(executor), std::move(name), batch), ledger_(std::move(ledger)), options_(std::move(options)),
      balancer_(std::move(capability), std::move(replica_names)), intake_(ledger_->replicas()),
      queues_(ledger_->replicas()), dealing_(ledger_->replicas()),
      feeds_(std::make_unique<std::atomic<std::uint32_t>[]>(ledger_->replicas())) {}

bool farm_dealer::measure_intake(std::size_t r, clock::time_point now) {
  auto& in = intake_[r];
  const std::uint32_t fill = outputs_[r].ring->size();
  const std::uint64_t fresh = in.fed - fill - in.taken;
  in.taken += fresh;
  double fresh_cost = static_cast<double>(fresh); // one each, unless the farm was given costs
  if (options_.cost) {
    fresh_cost = 0;
    for (std::uint64_t k = 0; k < fresh; ++k) {
      fresh_cost += in.in_ring.front();
      in.in_ring.pop_front();
    }
  }
  if (!in.backed) { // its ring was not full at the last turn: it may have waited for items
    in.window_open = false;
    return false;
  }
  // A kernel takes items in claims (a batched one takes its whole ring at a launch): a window runs
  // from one look that saw a claim to a later one, counting the claims after its first, so that
  // it holds as many claims as processing periods; at least two feeds' worth and a millisecond.
  if (fresh == 0) return false;
  if (!in.window_open) {
    in.window_open = true, in.window_items = 0, in.window_cost = 0, in.window_start = now;
    return false;
  }
  in.window_items += fresh, in.window_cost += fresh_cost;
  const auto took = now - in.window_start;
  if (in.window_items >= 2 * std::uint64_t{feed_limit(r)} && took >= std::chrono::milliseconds(1)) {
    balancer_.learn_speed(r, took, in.window_cost);
    in.items_per_cost = static_cast<double>(in.window_items) / in.window_cost;
    in.measured = true;
    in.window_items = 0, in.window_cost = 0, in.window_start = now;
    return true;
  }
  return false;
}

std::size_t farm_dealer::queue_limit() const {
  // Until a speed is measured each replica queues a first feed's worth, so that the first items
  // are not all dealt on the priors (compute units say little of a kernel's speed); then up to
  // `queue`.
  if (std::any_of(intake_.begin(), intake_.end(), [](const intake& in) { return in.measured; }))
    return std::size_t{options_.queue} * queues_.size();
  std::size_t limit = 0;
  for (std::size_t r = 0; r < queues_.size(); ++r)
    limit += std::min<std::size_t>(options_.queue, first_feed(*outputs_[r].ring));
  return limit;
}

std::uint32_t farm_dealer::first_feed(const ring_buffer& ring) { return std::min<std::uint32_t>(256, ring.capacity()); }

std::uint32_t farm_dealer::feed_limit(std::size_t r) const {
  const auto& in = intake_[r];
  const std::uint32_t first = first_feed(*outputs_[r].ring), ring = outputs_[r].ring->capacity();
  if (!in.measured) return first;
  const double ahead =
      balancer_.speed(r) * in.items_per_cost * std::chrono::duration<double>(options_.feed_ahead).count();
  // A power of two: on llvmpipe, told costs, feeds (a launch each) of 277-343 items ran twice as
  // long an item as feeds of 256 or 512 (the cause not isolated: a run across the end of the
  // batch's 1,024-slot mirror, or part groups).
  if (ahead >= ring) return ring;
  return std::max(first, std::bit_floor(static_cast<std::uint32_t>(ahead)));
}

std::uint32_t farm_dealer::fill_limit(const ring_buffer& r) const noexcept {
  for (std::size_t k = 0; k < outputs_.size(); ++k)
    if (outputs_[k].ring.get() == &r) {
      const std::uint32_t fed = feeds_[k].load(std::memory_order_relaxed);
      return fed != 0 ? fed : first_feed(r);
    }
  return r.capacity();
}

double farm_dealer::cost_of(const std::byte* item, std::uint64_t seq) const {
  if (!options_.cost) return 1;
  const double c = options_.cost(item);
  if (!(c > 0) || !std::isfinite(c))
    throw error(errc::invalid_argument, "farm '" + std::string(farm_of(name())) + "': item " + std::to_string(seq) +
                                            " costs " + std::to_string(c) +
                                            " (farm_options::cost must give a finite cost > 0)");
  return c;
}

std::uint32_t farm_dealer::hold_bytes(const std::byte* message) {
  if (free_slots_.empty()) { // twice as many slots (queue_limit() bounds them)
    const auto had = static_cast<std::uint32_t>(slots_.size() / in_size());
    const auto now = std::max<std::uint32_t>(64, 2 * had);
    slots_.resize(std::size_t{now} * in_size());
    for (std::uint32_t k = now; k-- > had;)
      free_slots_.push_back(k);
  }
  const std::uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  std::memcpy(slots_.data() + std::size_t{slot} * in_size(), message, in_size());
  return slot;
}

void farm_dealer::begin_dealing() {
  for (std::size_t r = 0; r < queues_.size(); ++r)
    dealing_[r] = {balancer_.load(r), balancer_.speed(r), 0, 0};
}

std::size_t farm_dealer::deal_to(double cost) {
  // As load_balancer::select_device would, on this turn's copy of the loads: only the dealer
  // changes them, and it tells the balancer once per turn (end_dealing) instead of per item.
  std::size_t r = 0;
  if (options_.dealing == farm_dealing::least_loaded) {
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t d = 0; d < dealing_.size(); ++d)
      if (const double t = (dealing_[d].load + cost) / dealing_[d].speed; t < best) best = t, r = d;
  } else {
    r = next_replica_;
    next_replica_ = (next_replica_ + 1) % queues_.size();
  }
  dealing_[r].load += cost, dealing_[r].dealt_cost += cost, ++dealing_[r].dealt;
  return r;
}

void farm_dealer::end_dealing() {
  for (std::size_t r = 0; r < dealing_.size(); ++r)
    if (dealing_[r].dealt > 0) balancer_.assign(r, dealing_[r].dealt_cost, dealing_[r].dealt);
}

void farm_dealer::steal_for(std::size_t thief) {
  // The victim is the queue that would drain last (queued over speed: with least-loaded dealing
  // the fastest replica's queue is the longest by design), and the take evens the two drain
  // times: half between replicas of one speed, little where the thief is the slower.
  // The balancer's load is the queued cost.
  std::size_t victim = thief;
  double last = 0;
  for (std::size_t r = 0; r < queues_.size(); ++r)
    if (const double t = balancer_.load(r) / balancer_.speed(r); r != thief && !queues_[r].empty() && t > last)
      last = t, victim = r;
  if (victim == thief) return;
  const double thief_speed = balancer_.speed(thief);
  const double target = balancer_.load(victim) * thief_speed / (thief_speed + balancer_.speed(victim));
  if (const std::size_t take = move_queued(victim, thief, target); take != 0) {
    steals.fetch_add(1, std::memory_order_relaxed);
    stolen.fetch_add(take, std::memory_order_relaxed);
  }
}

void farm_dealer::rebalance() {
  // Only on measured speeds: a prior (compute units) says too little to move work on.
  if (!std::all_of(intake_.begin(), intake_.end(), [](const intake& in) { return in.measured; })) return;
  std::size_t moved = 0;
  for (const rebalance_move& m : balancer_.rebalance_plan())
    moved += move_queued(m.from, m.to, m.load);
  if (moved == 0) return;
  rebalances.fetch_add(1, std::memory_order_relaxed);
  rebalanced.fetch_add(moved, std::memory_order_relaxed);
}

void farm_dealer::group_feed(std::size_t r, std::size_t n) {
  // Only within one feed: every item fed goes into the ring now, so none waits behind later
  // cheaper ones, and the ledger records the order fed, which the merger follows.
  if (!options_.cost || !options_.group_by_cost || n < 2) return;
  // Ties in dealing order (std::sort allocates nothing, where std::stable_sort would per feed).
  const auto by_cost = [](const item& a, const item& b) {
    return a.cost < b.cost || (a.cost == b.cost && a.seq < b.seq);
  };
  const auto first = queues_[r].begin(), last = first + static_cast<std::ptrdiff_t>(n);
  if (!std::is_sorted(first, last, by_cost)) std::sort(first, last, by_cost);
}

std::size_t farm_dealer::move_queued(std::size_t from, std::size_t to, double cost) {
  // The items dealt last: `from` keeps those it will reach first.
  auto& source = queues_[from];
  std::size_t take = 0;
  double moved = 0;
  const double most = cost * (1 + 1e-9); // a plan's cost is a sum of the same items' costs
  for (auto it = source.rbegin(); it != source.rend() && moved + it->cost <= most; ++it)
    moved += it->cost, ++take;
  if (take == 0) return 0;
  std::move(source.end() - static_cast<std::ptrdiff_t>(take), source.end(), std::back_inserter(queues_[to]));
  source.erase(source.end() - static_cast<std::ptrdiff_t>(take), source.end());
  balancer_.apply({from, to, take, moved});
  return take;
}

std::size_t farm_dealer::turn() {
  std::size_t moved = 0;
  const auto at = now();
  bool learnt = false;
  for (std::size_t r = 0; r < queues_.size(); ++r)
    learnt |= measure_intake(r, at);
  // Dealing keeps the drain times even at the speeds known when each item was dealt; when a speed
  // changes (a device slowed), what it holds is moved now rather than when another runs dry.
  if (learnt && options_.steal && options_.dealing == farm_dealing::least_loaded) rebalance();
  // Deal: number each item and queue it at the replica deal_to() picks, while the queues have room.
  const std::size_t limit = queue_limit();
  std::uint64_t ahead = 0;
  for (std::size_t r = 0; r < queues_.size(); ++r)
    ahead += 2 * (std::uint64_t{options_.queue} + outputs_[r].ring->capacity());
  begin_dealing();
  while (moved < batch() && queued_ < limit && next_seq_ - ledger_->passed_on.load(std::memory_order_acquire) < ahead &&
         inputs_.pop(in_buf_.data())) {
    const double cost = cost_of(in_buf_.data(), next_seq_);
    queues_[deal_to(cost)].push_back({next_seq_++, hold_bytes(in_buf_.data()), cost});
    ++queued_, ++moved;
  }
  end_dealing();
  msgs_in.fetch_add(moved, std::memory_order_relaxed);
  // Feed: each replica's ring from its queue, up to its feed limit; a replica with room and
  // nothing queued steals.
  bool feeds_changed = false;
  for (std::size_t r = 0; r < queues_.size(); ++r) {
    auto& ring = *outputs_[r].ring;
    const std::uint32_t feed = feed_limit(r), fill = ring.size(); // the fill only falls meanwhile
    if (feeds_[r].exchange(feed, std::memory_order_relaxed) != feed) feeds_changed = true;
    const std::size_t room = fill < feed ? feed - fill : 0;
    if (options_.steal && queues_[r].empty() && room > 0) steal_for(r);
    double fed_cost = 0;
    const std::size_t fed = std::min(queues_[r].size(), room);
    group_feed(r, fed);
    // In the ledger before the pushes, a feed at a time: the merger may see a result at once.
    feed_seqs_.clear();
    for (std::size_t k = 0; k < fed; ++k)
      feed_seqs_.push_back(queues_[r][k].seq);
    if (fed > 0) ledger_->given(r, feed_seqs_);
    // Published at once (one store of the head, not one per item): a launch that takes the ring
    // meanwhile gets the whole feed or none of it, so a feed in order of cost stays one run.
    feed_bytes_.resize(fed * in_size());
    for (std::size_t k = 0; k < fed; ++k) {
      const item& next = queues_[r].front();
      std::memcpy(feed_bytes_.data() + k * in_size(), slots_.data() + std::size_t{next.slot} * in_size(), in_size());
      free_slots_.push_back(next.slot);
      if (options_.cost) intake_[r].in_ring.push_back(next.cost);
      fed_cost += next.cost;
      queues_[r].pop_front();
    }
    if (fed > 0) (void)ring.push_n_bytes(feed_bytes_.data(), fed);
    queued_ -= fed, moved += fed;
    msgs_out.fetch_add(fed, std::memory_order_relaxed);
    // The balancer's load is what waits in the queues (what dealing and stealing can still move).
    if (fed > 0) balancer_.report_completion(r, {}, fed_cost, fed);
    intake_[r].fed += fed;
    // Fed to its limit, it had work until the next turn unless it took all of it, which counts: a
    // batched kernel that takes its ring at each launch runs at the pace the dealer refills it.
    intake_[r].backed = ring.size() >= feed;
  }
  if (feeds_changed) pace_by_rings();
  held_.store(queued_, std::memory_order_release);
  if (queued_ == 0 && inputs_.all_drained()) end_stream();
  return moved;
}

farm_merger::farm_merger(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch,
                         std::shared_ptr<farm_ledger> ledger, bool ordered, std::vector<std::string> replica_names)
    : host_stage(std::move(executor), std::move(name), batch), ledger_(std::move(ledger)), ordered_(ordered),
      replica_names_(std::move(replica_names)), given_(ledger_->replicas()) {}

bool farm_merger::front_given(std::size_t r, std::uint64_t& seq) {
  auto& given = given_[r];
  if (given.empty()) ledger_->take_all(r, given);
  if (given.empty()) return false;
  seq = given.front();
  return true;
}

bool farm_merger::take_result(std::size_t r, std::uint64_t& seq) {
  auto& input = *inputs_.all()[r];
  if (!input.ring->try_pop_bytes(in_buf_.data())) return false;
  input.popped.fetch_add(1, std::memory_order_relaxed);
  ++taken_;
  // Recorded before the item was pushed: a result whose number is not there was never given.
  if (!front_given(r, seq))
    throw error(errc::stage_failed, "farm replica '" + replica_names_[r] +
                                        "' returned more results than it was given items: an ordered "
                                        "farm needs one result per item");
  given_[r].pop_front();
  return true;
}

void farm_merger::pass_on(const std::byte* bytes) {
  (void)outputs_[0].ring->try_push_bytes(bytes);
  ++passed_;
}

std::size_t farm_merger::turn_ordered() {
  auto& out = *outputs_[0].ring;
  const std::size_t replicas = inputs_.all().size();
  // The next result in order is most often at the head of the ring of the replica it was given
  // to: it goes straight on, with no copy kept (a steal can put it behind later ones).
  while (passed_ < batch() && out.space() > 0) {
    if (const std::byte* kept = waiting_.next_kept()) {
      pass_on(kept);
      waiting_.take_next();
      continue;
    }
    // A replica with nothing in its ring is passed over without a look at the ledger (its lock).
    bool found = false;
    for (std::size_t r = 0; r < replicas && !found; ++r) {
      std::uint64_t seq = 0;
      found =
          inputs_.all()[r]->ring->size() != 0 && front_given(r, seq) && seq == waiting_.next() && take_result(r, seq);
    }
    if (!found) break;
    pass_on(in_buf_.data());
    waiting_.skip();
  }
  // Then every other result there is, which waits for its turn: the replicas' rings are emptied
  // (what is taken is bounded by what the dealer let in), so that their kernels go on.
  for (std::size_t r = 0; r < replicas; ++r) {
    std::uint64_t seq = 0;
    for (std::size_t k = 0; k < batch() && take_result(r, seq); ++k)
      waiting_.put(seq, std::span<const std::byte>(in_buf_).first(in_size()));
  }
  for (const std::byte* kept = waiting_.next_kept(); kept != nullptr && out.space() > 0; kept = waiting_.next_kept()) {
    pass_on(kept);
    waiting_.take_next();
  }
  return taken_ + passed_;
}

std::size_t farm_merger::turn() {
  auto& out = *outputs_[0].ring;
  taken_ = passed_ = 0;
  std::size_t moved = 0;
  if (ordered_) {
    moved = turn_ordered();
  } else {
    for (std::size_t r = 0; r < inputs_.all().size(); ++r) {
      // Results go on as they come; the ledger is only kept from growing (a kernel that drops
      // items leaves their numbers there).
      ledger_->take_all(r, given_[r]);
      given_[r].clear();
      while (passed_ < batch() && out.space() > 0 && inputs_.all()[r]->ring->try_pop_bytes(in_buf_.data())) {
        inputs_.all()[r]->popped.fetch_add(1, std::memory_order_relaxed);
        ++taken_;
        pass_on(in_buf_.data());
      }
    }
    moved = taken_ + passed_;
  }
  msgs_in.fetch_add(taken_, std::memory_order_relaxed);
  msgs_out.fetch_add(passed_, std::memory_order_relaxed);
  ledger_->passed_on.fetch_add(passed_, std::memory_order_release);
  held_.store(waiting_.size(), std::memory_order_release);
  if (moved == 0 && inputs_.all_drained()) {
    for (std::size_t r = 0; r < inputs_.all().size() && ordered_; ++r) {
      std::uint64_t seq = 0;
      if (front_given(r, seq))
        throw error(errc::stage_failed, "farm replica '" + replica_names_[r] + "' ended without a result for item " +
                                            std::to_string(seq) + ": an ordered farm needs one result per item");
    }
    if (waiting_.empty()) end_stream();
  }
  return moved;
}

} // namespace ringpipe::detail
