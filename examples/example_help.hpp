#pragma once
// The examples' command lines: --help says what an example does and its exit codes, and anything
// it does not take is refused with the same text; option values are checked before anything runs
// (a count that is no count, a file that cannot be written), not found wrong at the end.

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

namespace ringpipe::examples {

/// -1: run the example; otherwise the exit code to return at once (0 for --help, 2 otherwise).
inline int help_or_refuse(int argc, char** argv, const char* what) {
  if (argc <= 1) return -1;
  const bool help = argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"));
  std::fprintf(help ? stdout : stderr,
               "usage: %s\n  %s\nexit codes: 0 every result checked and right; 1 a check or the run failed; 2 bad "
               "arguments.\n",
               argv[0], what);
  return help ? 0 : 2;
}

/// `text` as a count from 1 to 4,294,967,295 (digits only: "-3" is no count), or nothing.
inline std::optional<std::uint32_t> parse_count(const char* text) {
  std::uint32_t n = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, ec] = std::from_chars(text, end, n);
  if (ec != std::errc() || stop != end || n == 0) return std::nullopt;
  return n;
}

/// `text` as a number of seconds above 0, or nothing.
inline std::optional<double> parse_seconds(const char* text) {
  double s = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, ec] = std::from_chars(text, end, s);
  if (ec != std::errc() || stop != end || !std::isfinite(s) || s <= 0) return std::nullopt;
  return s;
}

/// Says on stderr that `option` was given `value` and what it takes; the exit code for bad arguments.
inline int refuse_value(const char* program, const char* option, const char* takes, const char* value) {
  std::fprintf(stderr, "%s: %s takes %s, not '%s'\n", program, option, takes, value);
  return 2;
}

/// Opens `path` for the example's output before it runs, so that a path it cannot write is refused
/// at once; false (and why on stderr) where it cannot.
inline bool open_output(std::ofstream& out, const char* path, const char* program) {
  out.open(path);
  if (out) return true;
  std::fprintf(stderr, "%s: cannot write %s: %s\n", program, path, std::strerror(errno));
  return false;
}

/// Writes `text` to the opened output and closes it; false (and why on stderr) where not all of it
/// reached the file.
inline bool finish_output(std::ofstream& out, const std::string& text, const char* path) {
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "FAIL: cannot write %s: %s\n", path, std::strerror(errno));
  return static_cast<bool>(out);
}

} // namespace ringpipe::examples
