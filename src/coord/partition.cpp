// Static splits of [0, n): block, cyclic and weighted (largest remainder).
#include <ringpipe/error.hpp>
#include <ringpipe/partition.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace ringpipe {
namespace {

using parts_t = std::vector<std::vector<index_range>>;

[[noreturn]] void refuse(const partitioner& p, const std::string& why) {
  throw error(errc::invalid_argument, describe(p) + " partition: " + why);
}

parts_t contiguous(const std::vector<std::size_t>& sizes) {
  parts_t out(sizes.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 0) out[i].push_back({at, at + sizes[i]});
    at += sizes[i];
  }
  return out;
}

parts_t split_block(std::size_t n, std::size_t parts) {
  std::vector<std::size_t> sizes(parts, n / parts);
  for (std::size_t i = 0; i < n % parts; ++i)
    ++sizes[i];
  return contiguous(sizes);
}

parts_t split_cyclic(const cyclic_partition& c, std::size_t n, std::size_t parts) {
  parts_t out(parts);
  std::size_t part = 0;
  for (std::size_t at = 0; at < n; at += c.grain, part = (part + 1) % parts)
    out[part].push_back({at, std::min(n, at + c.grain)});
  return out;
}

parts_t split_weighted(const partitioner& p, const weighted_partition& w, std::size_t n, std::size_t parts) {
  if (w.weights.size() != parts)
    refuse(p, std::to_string(w.weights.size()) + " weights for " + std::to_string(parts) + " parts");
  double total = 0;
  for (double x : w.weights) {
    if (!std::isfinite(x) || x < 0) refuse(p, "every weight must be finite and >= 0");
    total += x;
  }
  if (total <= 0) refuse(p, "the weights add up to 0");
  std::vector<std::size_t> sizes(parts);
  std::vector<std::pair<double, std::size_t>> remainders;
  std::size_t given = 0;
  for (std::size_t i = 0; i < parts; ++i) {
    const double exact = static_cast<double>(n) * (w.weights[i] / total);
    sizes[i] = std::min(n - given, static_cast<std::size_t>(std::floor(exact)));
    given += sizes[i];
    remainders.emplace_back(exact - std::floor(exact), i);
  }
  // The indices rounding left over go to the largest remainders (ties: the lower part).
  std::stable_sort(remainders.begin(), remainders.end(), [](auto a, auto b) { return a.first > b.first; });
  for (std::size_t k = 0; given < n; k = (k + 1) % parts) {
    if (w.weights[remainders[k].second] == 0) continue;
    ++sizes[remainders[k].second];
    ++given;
  }
  return contiguous(sizes);
}

} // namespace

std::string to_string(index_range r) { return "[" + std::to_string(r.first) + ", " + std::to_string(r.last) + ")"; }

std::string describe(const partitioner& p) {
  std::ostringstream s;
  if (std::holds_alternative<block_partition>(p)) s << "block";
  if (const auto* c = std::get_if<cyclic_partition>(&p)) s << "cyclic (grain " << c->grain << ")";
  if (const auto* w = std::get_if<weighted_partition>(&p)) {
    s << "weighted (";
    for (std::size_t i = 0; i < w->weights.size(); ++i)
      s << (i ? ", " : "") << w->weights[i];
    s << ")";
  }
  if (std::holds_alternative<dynamic_partition>(p)) s << "dynamic";
  return s.str();
}

std::vector<std::vector<index_range>> split(const partitioner& p, std::size_t n, std::size_t parts) {
  if (parts == 0) refuse(p, "no parts to split over");
  if (std::holds_alternative<block_partition>(p)) return split_block(n, parts);
  if (const auto* c = std::get_if<cyclic_partition>(&p)) {
    if (c->grain == 0) refuse(p, "a grain of 0 indices");
    return split_cyclic(*c, n, parts);
  }
  if (const auto* w = std::get_if<weighted_partition>(&p)) return split_weighted(p, *w, n, parts);
  refuse(p, "chunks are sized while running: only parallel_for splits with it");
}

} // namespace ringpipe
