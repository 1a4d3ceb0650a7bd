#pragma once
// The farm's host side (include/ringpipe/farm.hpp): the dealer (queues per replica, dealing by a
// load balancer that learns how fast each replica takes items, stealing) and the merger (results
// back in input order), and the ledger between them: which item numbers each replica was given,
// in the order it was given them.

#include "host_stage.hpp"
#include "reorder_buffer.hpp"

#include <ringpipe/balance.hpp>
#include <ringpipe/farm.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <vector>

namespace ringpipe::detail {

class farm_ledger {
public:
  explicit farm_ledger(std::size_t replicas);
  /// Dealer side: items `seqs` go into replica `r`'s ring in this order (recorded before they are
  /// pushed). One lock per feed, not per item.
  void given(std::size_t r, std::span<const std::uint64_t> seqs);
  /// Merger side: moves every number recorded for replica `r` to the back of `into` (the numbers
  /// of its next results, in order).
  void take_all(std::size_t r, std::deque<std::uint64_t>& into);
  std::size_t replicas() const noexcept { return logs_.size(); }
  /// Results the merger has passed on: the dealer stays within a window of it, so that the
  /// results an ordered merger holds back (waiting for a slow replica) stay bounded.
  std::atomic<std::uint64_t> passed_on{0};

private:
  struct alignas(64) log {
    std::mutex mutex;
    std::deque<std::uint64_t> seqs;
  };
  std::vector<std::unique_ptr<log>> logs_;
};

class farm_dealer : public host_stage {
public:
  /// `capability`: each replica's relative speed before any is measured (its device's compute
  /// units); `replica_names` name them in the balance report.
  farm_dealer(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch,
              std::shared_ptr<farm_ledger> ledger, farm_options options, std::vector<double> capability,
              std::vector<std::string> replica_names);
  std::atomic<std::uint64_t> steals{0};     ///< times a dry replica took from another's queue
  std::atomic<std::uint64_t> stolen{0};     ///< items moved by those steals
  std::atomic<std::uint64_t> rebalances{0}; ///< times queues drifted apart (a speed changed) and were evened
  std::atomic<std::uint64_t> rebalanced{0}; ///< items moved by those rebalances
  std::uint64_t held() const noexcept override { return held_.load(std::memory_order_acquire); }
  bool sleeps_until_input() const noexcept override { return false; } // its queues are its work too
  /// A replica's ring: what the last turn fed it up to (feed_limit). Any thread.
  std::uint32_t fill_limit(const ring_buffer& r) const noexcept override;
  /// Per replica: items queued for it, its measured speed (items per second) and how evenly the
  /// queues would drain. Any thread.
  balance_report balance() const { return balancer_.report(); }

protected:
  std::size_t turn() override;

private:
  using clock = poll_executor::clock;
  struct item {
    std::uint64_t seq;
    std::uint32_t slot; // where its bytes wait (slots_)
    double cost;
  };
  /// How fast a replica takes items from its ring: items over windows in which the dealer kept it
  /// full at every turn.
  struct intake {
    std::uint64_t fed = 0;      // items pushed into its ring
    std::uint64_t taken = 0;    // of those, taken by the replica
    std::deque<double> in_ring; // with farm_options::cost: the costs of the items fed and not yet taken
    std::uint64_t window_items = 0;
    double window_cost = 0;
    bool backed = false;       // its ring was filled to its feed limit at the last turn
    bool window_open = false;  // window_start was a look that saw a claim
    bool measured = false;     // a speed has been learnt
    double items_per_cost = 1; // in the last window that gave a speed (1 without farm_options::cost)
    clock::time_point window_start{};
  };
  /// Counts what replica r took since the last turn; true when that gave a new speed sample.
  bool measure_intake(std::size_t r, clock::time_point now);
  /// An item's cost (farm_options::cost; refused, naming the farm, unless finite and > 0).
  double cost_of(const std::byte* item, std::uint64_t seq) const;
  /// This turn's dealing: deal_to() picks replicas on a copy of the balancer's loads taken by
  /// begin_dealing(), and end_dealing() adds what was dealt to the balancer.
  void begin_dealing();
  std::size_t deal_to(double cost);
  void end_dealing();
  /// How many items the queues may hold in all now.
  std::size_t queue_limit() const;
  /// What a replica's ring is fed up to before its speed is known, and at least after.
  static std::uint32_t first_feed(const ring_buffer& ring);
  /// What replica r's ring is fed up to now: farm_options::feed_ahead of its measured speed, down
  /// to a power of two.
  std::uint32_t feed_limit(std::size_t r) const;
  void steal_for(std::size_t thief);
  /// Orders the first `n` items of replica r's queue by cost (farm_options::group_by_cost).
  void group_feed(std::size_t r, std::size_t n);
  /// After a speed changed: the balancer's plan, when the queues' drain times drift apart.
  void rebalance();
  /// Moves the items dealt last from `from`'s queue to `to`'s, up to `cost` of them; the count.
  std::size_t move_queued(std::size_t from, std::size_t to, double cost);
  std::shared_ptr<farm_ledger> ledger_;
  farm_options options_;
  load_balancer balancer_;
  std::vector<intake> intake_;
  std::vector<std::deque<item>> queues_;
  struct dealing {
    double load = 0, speed = 1, dealt_cost = 0;
    std::size_t dealt = 0;
  };
  std::vector<dealing> dealing_;                        // per replica, this turn
  std::unique_ptr<std::atomic<std::uint32_t>[]> feeds_; // per replica, the last turn's feed_limit (0: none yet)
  /// The queued items' bytes, a slot each, reused once fed (no allocation per item).
  std::vector<std::byte> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t hold_bytes(const std::byte* message);
  std::vector<std::uint64_t> feed_seqs_; // one feed's item numbers, for the ledger
  std::vector<std::byte> feed_bytes_;    // and its items, pushed at once
  std::size_t queued_ = 0, next_replica_ = 0;
  std::atomic<std::uint64_t> held_{0}; // queued_, for other threads
  std::uint64_t next_seq_ = 0;
};

class farm_merger : public host_stage {
public:
  farm_merger(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch,
              std::shared_ptr<farm_ledger> ledger, bool ordered, std::vector<std::string> replica_names);

  std::uint64_t held() const noexcept override { return held_.load(std::memory_order_acquire); }
  bool sleeps_until_input() const noexcept override { return false; } // its queues are its work too

protected:
  std::size_t turn() override;

private:
  /// Replica r's next result's number (taken from the ledger a run at a time); false if none.
  bool front_given(std::size_t r, std::uint64_t& seq);
  /// Takes one result from replica r's ring into in_buf_ and its number; false if none is there.
  bool take_result(std::size_t r, std::uint64_t& seq);
  /// Pushes `bytes` to the output (its room was checked) and counts it passed on.
  void pass_on(const std::byte* bytes);
  std::size_t turn_ordered();

  std::atomic<std::uint64_t> held_{0}; // waiting_.size(), for other threads
  std::shared_ptr<farm_ledger> ledger_;
  bool ordered_;
  std::vector<std::string> replica_names_;
  std::vector<std::deque<std::uint64_t>> given_; // per replica: numbers taken from the ledger
  reorder_buffer waiting_;                       // results ahead of the next in order, and that number
  std::size_t taken_ = 0, passed_ = 0;           // this turn's, counted once at its end
};

} // namespace ringpipe::detail
