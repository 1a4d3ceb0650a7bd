// The load balancer: per-device load and queued items in atomics (one cache line each), speeds as
// the median of a window of completions (cost per second) under a per-device lock.
#include <ringpipe/balance.hpp>
#include <ringpipe/error.hpp>
#include <ringpipe/topology.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ringpipe {

struct alignas(64) load_balancer::slot {
  std::string name;
  double capability = 1;
  std::atomic<double> load{0};
  std::atomic<long long> items{0};
  std::atomic<double> measured{0}; // median of samples; 0 until the first completion
  std::atomic<std::size_t> completed{0};
  std::mutex samples_mutex;
  std::deque<double> samples;
};

load_balancer::load_balancer(std::vector<double> capability, std::vector<std::string> names, balancer_options options)
    : options_(options) {
  if (capability.empty()) throw error(errc::invalid_argument, "load_balancer: no devices to balance over");
  if (!names.empty() && names.size() != capability.size())
    throw error(errc::invalid_argument, "load_balancer: " + std::to_string(names.size()) + " names for " +
                                            std::to_string(capability.size()) + " devices");
  if (options_.speed_window == 0) options_.speed_window = 1;
  for (std::size_t i = 0; i < capability.size(); ++i) {
    if (!(capability[i] > 0) || !std::isfinite(capability[i]))
      throw error(errc::invalid_argument, "load_balancer: device " + std::to_string(i) + " has capability " +
                                              std::to_string(capability[i]) + " (must be finite and > 0)");
    auto s = std::make_unique<slot>();
    s->name = names.empty() ? "device " + std::to_string(i) : names[i];
    s->capability = capability[i];
    slots_.push_back(std::move(s));
  }
}

namespace {
// The upper median of `v` (not empty); reorders it.
double median_of(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::vector<double> compute_units(const topology& devices) {
  std::vector<double> c;
  for (const auto& d : devices)
    c.push_back(std::max<double>(1, d.info().compute_units));
  return c;
}
std::vector<std::string> labels(const topology& devices) {
  std::vector<std::string> n;
  for (const auto& d : devices)
    n.push_back(d.label());
  return n;
}
} // namespace

load_balancer::load_balancer(const topology& devices, balancer_options options)
    : load_balancer(compute_units(devices), labels(devices), options) {}

load_balancer::~load_balancer() = default;

load_balancer::slot& load_balancer::at(std::size_t device) const {
  if (device >= slots_.size())
    throw error(errc::invalid_argument, "load_balancer: no device " + std::to_string(device) + " (it has " +
                                            std::to_string(slots_.size()) + ")");
  return *slots_[device];
}

void load_balancer::add(std::size_t device, double cost, long long items) {
  slot& s = at(device);
  const long long left = s.items.fetch_add(items) + items;
  if (left < 0) s.items.fetch_sub(left); // completions of items never counted: clamp at zero
  double old = s.load.load();
  // Load never goes negative, and is exactly zero once nothing is queued (no rounding residue).
  while (!s.load.compare_exchange_weak(old, left <= 0 ? 0.0 : std::max(0.0, old + cost))) {
  }
}

double load_balancer::speed(std::size_t device) const {
  const slot& s = at(device);
  if (const double m = s.measured.load(); m > 0) return m;
  // Not measured yet: its prior, in the units of the devices that were (median of their ratios).
  const double ratio = prior_ratio_.load();
  return ratio > 0 ? s.capability * ratio : s.capability;
}

std::size_t load_balancer::select_device(double cost) {
  std::size_t best = 0;
  double best_time = std::numeric_limits<double>::infinity();
  for (std::size_t d = 0; d < slots_.size(); ++d) {
    const double t = (slots_[d]->load.load() + cost) / speed(d);
    if (t < best_time) best_time = t, best = d;
  }
  add(best, cost, 1);
  return best;
}

void load_balancer::assign(std::size_t device, double cost, std::size_t items) {
  add(device, cost, static_cast<long long>(items));
}

void load_balancer::report_completion(std::size_t device, std::chrono::nanoseconds took, double cost,
                                      std::size_t items) {
  slot& s = at(device);
  add(device, -cost, -static_cast<long long>(items));
  s.completed.fetch_add(items);
  learn_speed(device, took, cost);
}

void load_balancer::learn_speed(std::size_t device, std::chrono::nanoseconds took, double cost) {
  slot& s = at(device);
  if (took.count() <= 0 || cost <= 0) return;
  std::lock_guard lock(s.samples_mutex);
  s.samples.push_back(cost / std::chrono::duration<double>(took).count());
  while (s.samples.size() > options_.speed_window)
    s.samples.pop_front();
  std::vector<double> sorted(s.samples.begin(), s.samples.end());
  s.measured.store(median_of(sorted));
  // Two completions at once may store their ratios in either order: the next one mends it.
  std::vector<double> ratios;
  for (const auto& o : slots_)
    if (const double m = o->measured.load(); m > 0) ratios.push_back(m / o->capability);
  prior_ratio_.store(median_of(ratios));
}

void load_balancer::apply(const rebalance_move& m) {
  add(m.from, -m.load, -static_cast<long long>(m.items));
  add(m.to, m.load, static_cast<long long>(m.items));
}

double load_balancer::load(std::size_t device) const { return at(device).load.load(); }
std::size_t load_balancer::items(std::size_t device) const {
  return static_cast<std::size_t>(std::max(0LL, at(device).items.load()));
}

double load_balancer::imbalance() const {
  double max = 0, sum = 0;
  for (std::size_t d = 0; d < slots_.size(); ++d) {
    const double t = load(d) / speed(d);
    max = std::max(max, t);
    sum += t;
  }
  return sum > 0 ? max / (sum / static_cast<double>(slots_.size())) : 1.0;
}

std::vector<rebalance_move> load_balancer::rebalance_plan() const {
  if (imbalance() <= options_.rebalance_above) return {};
  const std::size_t n = slots_.size();
  std::vector<double> loads(n), speeds(n), surplus(n);
  std::vector<std::size_t> queued(n);
  double total_load = 0, total_speed = 0;
  for (std::size_t d = 0; d < n; ++d) {
    loads[d] = load(d), speeds[d] = speed(d), queued[d] = items(d);
    total_load += loads[d], total_speed += speeds[d];
  }
  const double drain = total_load / total_speed; // every device's drain time once even
  for (std::size_t d = 0; d < n; ++d)
    surplus[d] = loads[d] - drain * speeds[d];
  std::vector<rebalance_move> plan;
  for (;;) {
    const auto from = static_cast<std::size_t>(std::max_element(surplus.begin(), surplus.end()) - surplus.begin());
    const auto to = static_cast<std::size_t>(std::min_element(surplus.begin(), surplus.end()) - surplus.begin());
    if (queued[from] == 0 || loads[from] <= 0) break;
    const double per_item = loads[from] / static_cast<double>(queued[from]);
    const double want = std::min(surplus[from], -surplus[to]);
    const auto items = std::min(queued[from], static_cast<std::size_t>(std::llround(want / per_item)));
    if (items == 0) break;
    const double moved = per_item * static_cast<double>(items);
    plan.push_back({from, to, items, moved});
    surplus[from] -= moved, surplus[to] += moved;
    loads[from] -= moved, queued[from] -= items;
  }
  return plan;
}

balance_report load_balancer::report() const {
  balance_report r;
  for (std::size_t d = 0; d < slots_.size(); ++d) {
    const slot& s = *slots_[d];
    const double sp = speed(d);
    r.devices.push_back({s.name, items(d), load(d), sp, s.measured.load() > 0, load(d) / sp, s.completed.load()});
  }
  r.imbalance = imbalance();
  return r;
}

std::string balance_report::table() const {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "%-44s %8s %12s %12s %10s %10s\n", "device", "queued", "load", "speed/s", "drain s",
                "completed");
  s << line;
  for (const auto& d : devices) {
    std::snprintf(line, sizeof line, "%-44.44s %8zu %12.4g %11.4g%s %10.4g %10zu\n", d.name.c_str(), d.items, d.load,
                  d.speed, d.measured ? " " : "*", d.drain_seconds, d.completed);
    s << line;
  }
  std::snprintf(line, sizeof line, "imbalance (max / mean drain time): %.3f%s\n", imbalance,
                std::any_of(devices.begin(), devices.end(), [](const device_load& d) { return !d.measured; })
                    ? " (* speed not measured yet: the prior)"
                    : "");
  s << line;
  return s.str();
}

} // namespace ringpipe
