#pragma once
// The farm's host side (include/ringpipe/farm.hpp): the dealer (queues per replica, dealing by a
// load balancer that learns how fast each replica takes items, stealing) and the merger (results
// back in input order), and the ledger between them: which item numbers each replica was given,
// in the order it was given them.

#include "host_stage.hpp"

#include <ringpipe/balance.hpp>
#include <ringpipe/farm.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace ringpipe::detail {

class farm_ledger {
public:
  explicit farm_ledger(std::size_t replicas);
  /// Dealer side: item `seq` goes into replica `r`'s ring (recorded before it is pushed).
  void given(std::size_t r, std::uint64_t seq);
  /// Merger side: the number of replica `r`'s next result; false when it was given nothing more.
  bool next_of(std::size_t r, std::uint64_t& seq);
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
  /// Per replica: items queued for it, its measured speed (items per second) and how evenly the
  /// queues would drain. Any thread.
  balance_report balance() const { return balancer_.report(); }

protected:
  std::size_t turn() override;

private:
  using clock = poll_executor::clock;
  struct item {
    std::uint64_t seq;
    std::vector<std::byte> bytes;
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
    bool backed = false;      // its ring was full after the last turn's feeding
    bool window_open = false; // window_start was a look that saw a claim
    bool measured = false;    // a speed has been learnt
    clock::time_point window_start{};
  };
  /// Counts what replica r took since the last turn; true when that gave a new speed sample.
  bool measure_intake(std::size_t r, clock::time_point now);
  /// An item's cost (farm_options::cost; refused, naming the farm, unless finite and > 0).
  double cost_of(const std::byte* item, std::uint64_t seq) const;
  std::size_t deal_to(double cost);
  /// How many items the queues may hold in all now.
  std::size_t queue_limit() const;
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
  std::size_t queued_ = 0, next_replica_ = 0;
  std::atomic<std::uint64_t> held_{0}; // queued_, for other threads
  std::uint64_t next_seq_ = 0;
};

class farm_merger : public host_stage {
public:
  farm_merger(std::shared_ptr<poll_executor> executor, std::string name, std::uint32_t batch,
              std::shared_ptr<farm_ledger> ledger, bool ordered, std::vector<std::string> replica_names);

  std::uint64_t held() const noexcept override { return held_.load(std::memory_order_acquire); }

protected:
  std::size_t turn() override;

private:
  std::atomic<std::uint64_t> held_{0}; // waiting_.size(), for other threads
  std::shared_ptr<farm_ledger> ledger_;
  bool ordered_;
  std::vector<std::string> replica_names_;
  std::map<std::uint64_t, std::vector<std::byte>> waiting_; // results ahead of the next in order
  std::uint64_t next_ = 0;
};

} // namespace ringpipe::detail
