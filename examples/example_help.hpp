#pragma once
// The command line of the examples that take no options: --help says what the example does and
// its exit codes; anything else is refused with the same text.

#include <cstdio>
#include <cstring>

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

} // namespace ringpipe::examples
