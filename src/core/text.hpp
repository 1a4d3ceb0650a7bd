#pragma once
// Text for people: counts and rates with three significant digits and a decimal prefix
// ("1.23 M msgs", "833 MB/s"), printf into a string, table cells clipped to their width, and
// Graphviz strings.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ringpipe::detail {

/// amount(1234567, "msgs") = "1.23 M msgs", amount(1, "msgs") = "1 msg", amount(16e6, "B") = "16 MB";
/// exact below 1,000.
std::string amount(std::uint64_t n, std::string_view unit);
/// rate(52.1e6, "msgs") = "52.1 M msgs/s", rate(8.33e8, "B") = "833 MB/s", rate(0.5, "msgs") = "0.5 msgs/s".
std::string rate(double per_s, std::string_view unit);

/// snprintf into a string (at most 511 characters).
std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

/// `s` as a Graphviz quoted string (quotes and backslashes escaped, newlines as \n).
std::string dot_quoted(std::string_view s);

/// "#2 rusticl: llvmpipe (LLVM 15.0.6, 256 bits)" -> "#2 llvmpipe (LLVM 15.0.6, 256 bits)": a device's
/// index and name without its platform, short enough for a table's column.
inline std::string short_label(const std::string& label) {
  const auto colon = label.find(": ");
  const auto space = label.find(' ');
  if (colon == std::string::npos || space == std::string::npos || space > colon) return label;
  return label.substr(0, space) + " " + label.substr(colon + 2);
}

/// `s` cut to `n` characters, its last one a '~' when cut.
inline std::string clip(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  // Appends to the cut copy: GCC 12 reads `substr(...) + "~"` as writing past the string (-Warray-bounds)
  // once inlined, depending on the headers included before (a precompiled set makes it so).
  std::string cut = s.substr(0, n - 1);
  cut.push_back('~');
  return cut;
}

} // namespace ringpipe::detail
