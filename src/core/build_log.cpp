#include "build_log.hpp"

#include <charconv>
#include <vector>

namespace ringpipe::detail {
namespace {

struct place {
  std::string file;
  unsigned line = 0;
};

// For each line of `source` (index 0 is line 1), where it came from, as the preprocessor counts.
std::vector<place> line_places(std::string_view source) {
  std::vector<place> places;
  place next{"", 1};
  for (std::size_t pos = 0; pos <= source.size();) {
    const auto end = std::min(source.find('\n', pos), source.size());
    const auto text = source.substr(pos, end - pos);
    places.push_back(next);
    ++next.line;
    if (text.starts_with("#line ")) {
      unsigned n = 0;
      const auto digits = text.substr(6);
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      const auto open = text.find('"'), close = text.rfind('"');
      if (ec == std::errc{} && open != close) next = {std::string(text.substr(open + 1, close - open - 1)), n};
    }
    pos = end + 1;
  }
  return places;
}

} // namespace

std::string log_at_source_lines(std::string_view source, std::string log) {
  std::vector<place> places;
  for (const std::string_view name : {"<kernel>:", "<source>:", "<stdin>:"}) {
    for (std::size_t at = log.find(name); at != std::string::npos; at = log.find(name, at + 1)) {
      const auto digits = at + name.size();
      unsigned line = 0;
      const auto [ptr, ec] = std::from_chars(log.data() + digits, log.data() + log.size(), line);
      if (places.empty()) places = line_places(source);
      if (ec != std::errc{} || line == 0 || line > places.size() || places[line - 1].file.empty()) continue;
      const auto& p = places[line - 1];
      const auto replacement = p.file + ":" + std::to_string(p.line);
      log.replace(at, static_cast<std::size_t>(ptr - (log.data() + at)), replacement);
    }
  }
  return log;
}

} // namespace ringpipe::detail
