#include <ringpipe/cpu_cores.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace ringpipe {

std::string cpu_core_use::describe() const {
  if (pools == 0) return {};
  std::string s =
      pools == 1 ? "1 worker pool of CPU devices runs " : std::to_string(pools) + " worker pools of CPU devices run ";
  s += std::to_string(worker_threads) + (worker_threads == 1 ? " thread on " : " threads on ") +
       std::to_string(host_cores) + (host_cores == 1 ? " host core" : " host cores");
  if (pools < 2) return s;
  return s + (shared() ? ": they share the cores" : ": each has cores of its own");
}

cpu_core_use cpu_devices_core_use(const std::vector<const device*>& devices, unsigned host_cores) {
  std::map<std::string, std::uint32_t> pools; // budget_pool: PoCL's CPU devices share one
  for (const device* d : devices)
    if (d->info().type == device_type::cpu) {
      auto& threads = pools[d->info().budget_pool.empty() ? "#" + std::to_string(d->index()) : d->info().budget_pool];
      threads = std::max(threads, std::max<std::uint32_t>(1, d->info().worker_threads));
    }
  cpu_core_use use;
  use.pools = pools.size();
  use.host_cores = host_cores;
  for (const auto& [name, threads] : pools)
    use.worker_threads += threads;
  return use;
}

std::uint32_t llvmpipe_worker_threads(const char* lp_num_threads, unsigned cpus) noexcept {
  constexpr unsigned lp_max_threads = 32;
  if (lp_num_threads != nullptr && *lp_num_threads != '\0') {
    char* end = nullptr;
    const long n = std::strtol(lp_num_threads, &end, 10);
    if (end != lp_num_threads && n >= 0)
      return std::clamp<std::uint32_t>(static_cast<std::uint32_t>(std::min(n, 1L << 20)), 1, lp_max_threads);
  }
  return std::clamp(cpus, 1u, lp_max_threads);
}

} // namespace ringpipe
