#pragma once
// Where the tools' results go. A --json FILE is checked before a tool measures anything (a path it
// cannot write is refused at once, not after minutes of runs, and a file already there is kept
// until the new one is ready), then written whole or said not to be; standard output likewise.

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <unistd.h>

namespace ringpipe::tools {

/// Empty where `path` can be written (a file that may be written to, or none yet in a directory
/// that may be); otherwise why not, naming the path.
inline std::string cannot_write(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "cannot write " + path + ": it is a directory";
  const fs::path where = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  const bool exists = ::access(path.c_str(), F_OK) == 0;
  if (::access(exists ? path.c_str() : where.c_str(), W_OK) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return {};
}

/// Writes `text` to `path`, replacing it; empty when all of it reached the file, otherwise why not.
inline std::string write_whole(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f << text;
  if (f) f.close();
  if (!f) return "cannot write " + path + ": " + std::strerror(errno);
  return {};
}

/// Whether everything the tool printed reached standard output (a full disk, say).
inline bool stdout_written() {
  std::cout.flush();
  return static_cast<bool>(std::cout);
}

} // namespace ringpipe::tools
