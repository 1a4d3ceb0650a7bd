#pragma once
// Devices of one pool run on the same cores, so the pool's fastest takes every chunk
// (parallel_for.cpp). A device measured slower than it is (a run's noise, another program's load
// at the time) would then take no chunk again, and so never be measured again: one slow outlier
// would starve it for every later run of the kernel. This rule gives such an idle device one
// measuring chunk after 1, 2, 4, ... 64 runs without any; the wait doubles each time that chunk
// leaves it slower than the pool's fastest, and is 1 again once it takes chunks. A device
// recorded at under half the fastest's speed is left idle: each measuring chunk costs the pool
// up to a run's 1/first_chunks, which a device that far behind would not win back.

#include "chunk_sizing.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ringpipe::detail {

class idle_remeasure {
public:
  static constexpr std::size_t longest_wait = 64; ///< runs
  static constexpr double within = 0.5;           ///< of the pool's fastest speed

  /// Whether a device takes a measuring chunk first in this run. `rate`: its recorded speed;
  /// `fastest`: the fastest recorded in its pool (its own, when it is the pool's only device).
  bool due(std::size_t device, double rate, double fastest) const {
    const auto it = idle_.find(device);
    const idle s = it == idle_.end() ? idle{} : it->second;
    return s.runs >= s.wait && rate < fastest && rate >= within * fastest;
  }
  /// At a run's start: the lanes that take a measuring chunk first, at most one a pool (the first
  /// due).
  std::vector<std::size_t> choose(const std::vector<lane_speed>& lanes) const {
    std::vector<std::size_t> chosen;
    std::set<std::string> pools_chosen;
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      if (!lanes[l].known || !lanes[l].alive || pools_chosen.count(lanes[l].pool) != 0) continue;
      double fastest = 0;
      for (const auto& k : lanes)
        if (k.pool == lanes[l].pool && k.known && k.alive) fastest = std::max(fastest, k.rate);
      if (due(lanes[l].device, lanes[l].rate, fastest)) {
        chosen.push_back(l);
        pools_chosen.insert(lanes[l].pool);
      }
    }
    return chosen;
  }
  /// At a run's end, for each device of a dynamic run: the chunks it ended, and whether the first
  /// was a measuring one that choose() gave it. A device alone in its pool is never due.
  void ended(std::size_t device, std::size_t chunks, bool remeasured) {
    idle& s = idle_[device];
    if (chunks > (remeasured ? 1U : 0U)) {
      s = idle{}; // it ran: it is measured as it runs
    } else if (remeasured) {
      s.runs = 0;
      s.wait = std::min(2 * s.wait, longest_wait);
    } else {
      ++s.runs;
    }
  }

private:
  struct idle {
    std::size_t runs = 0; // runs in a row without a chunk, since the last measuring one
    std::size_t wait = 1; // runs to wait before the next measuring chunk
  };
  std::map<std::size_t, idle> idle_; // per device index
};

} // namespace ringpipe::detail
