#include "text.hpp"

#include <cstdio>
#include <iterator>

namespace ringpipe::detail {

namespace {

// `v` scaled below 1,000 with three significant digits, and its prefix ("k", "M", ...).
std::pair<std::string, const char*> scaled(double v) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T"};
  std::size_t p = 0;
  for (; v >= 1000 && p + 1 < std::size(prefixes); ++p)
    v /= 1000;
  char number[32];
  std::snprintf(number, sizeof number, "%.3g", v);
  return {number, prefixes[p]};
}

std::string joined(const std::string& digits, const char* prefix, std::string_view unit) {
  if (unit == "B") return digits + " " + prefix + "B";
  return digits + (*prefix ? std::string(" ") + prefix : "") + (unit.empty() ? "" : " " + std::string(unit));
}

} // namespace

std::string amount(std::uint64_t n, std::string_view unit) {
  const auto [digits, prefix] = scaled(static_cast<double>(n));
  return joined(*prefix ? digits : std::to_string(n), prefix, n == 1 && unit == "msgs" ? "msg" : unit);
}

std::string dot_quoted(std::string_view s) {
  std::string q = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return q + "\"";
}

std::string rate(double per_s, std::string_view unit) {
  const auto [digits, prefix] = scaled(per_s > 0 ? per_s : 0);
  return joined(digits, prefix, unit) + "/s";
}

} // namespace ringpipe::detail
