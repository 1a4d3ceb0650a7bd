#include "build_log.hpp"

#include <ringpipe/detail/embedded_sources.hpp>
#include <ringpipe/device.hpp>
#include <ringpipe/program.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace ringpipe {
namespace {

namespace fs = std::filesystem;

// One source being pasted: its text, what diagnostics call it, and its directory if it is a file.
struct source_file {
  std::string_view text;
  std::string name;
  std::optional<fs::path> dir;
};

// A file found for an #include: its text (owned if read from disk), name and directory.
struct found_file {
  std::string key; // once-per-file identity
  std::string text;
  std::string name;
  std::optional<fs::path> dir;
};

std::optional<found_file> read_disk_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  const auto canonical = fs::weakly_canonical(path, ec);
  return found_file{"file:" + (ec ? path : canonical).string(), text.str(), path.string(), path.parent_path()};
}

// "x": the includer's directory, the include paths, then the embedded files; <x>: the embedded
// files, then the include paths.
std::optional<found_file> find_include(std::string_view path, bool quoted, const source_file& from,
                                       const std::vector<std::string>& include_dirs) {
  const auto embedded = [&]() -> std::optional<found_file> {
    if (const auto text = embedded_source(path))
      return found_file{"embedded:" + std::string(path), std::string(*text), std::string(path), std::nullopt};
    return std::nullopt;
  };
  if (!quoted)
    if (auto f = embedded()) return f;
  if (quoted && from.dir)
    if (auto f = read_disk_file(*from.dir / path)) return f;
  for (const auto& dir : include_dirs)
    if (auto f = read_disk_file(fs::path(dir) / path)) return f;
  return quoted ? embedded() : std::nullopt;
}

std::string where_searched(const source_file& from, const std::vector<std::string>& include_dirs) {
  std::string dirs;
  if (from.dir) dirs = "'" + from.dir->string() + "'";
  for (const auto& d : include_dirs)
    dirs += (dirs.empty() ? "'" : ", '") + d + "'";
  std::string embedded;
  for (const auto& e : detail::embedded_sources())
    embedded += (embedded.empty() ? "" : ", ") + std::string(e.path);
  return (dirs.empty() ? std::string("no include directory (kernel_spec::include_dirs)") : "directories " + dirs) +
         " and the embedded files (" + embedded + ")";
}

// Pastes `file` with its includes resolved, each file once. #line directives keep every line
// attributed to its own file: after an included file, numbering resumes in the includer at the
// line after the #include.
void append_resolved(const source_file& file, const std::vector<std::string>& include_dirs, std::string& out,
                     std::set<std::string>& included) {
  const auto source = file.text;
  std::size_t pos = 0;
  std::size_t number = 0; // of the current line in `file`
  while (pos < source.size()) {
    ++number;
    auto end = source.find('\n', pos);
    if (end == std::string_view::npos) end = source.size();
    const auto line = source.substr(pos, end - pos);
    const auto first = line.find_first_not_of(" \t");
    const bool include = first != std::string_view::npos && line.substr(first).starts_with("#include");
    const auto at = file.name + ":" + std::to_string(number);
    if (include) {
      const auto open = line.find_first_of("<\"", first);
      const auto close = open == std::string_view::npos ? open : line.find_first_of(">\"", open + 1);
      if (close == std::string_view::npos)
        throw error(errc::invalid_argument, at + ": malformed #include: " + std::string(line));
      const auto path = line.substr(open + 1, close - open - 1);
      const auto found = find_include(path, line[open] == '"', file, include_dirs);
      if (!found) {
        throw error(errc::invalid_argument, at + ": cannot find included file '" + std::string(path) + "'; searched " +
                                                where_searched(file, include_dirs));
      }
      if (included.insert(found->key).second) {
        out += "#line 1 \"" + found->name + "\"\n";
        append_resolved(source_file{found->text, found->name, found->dir}, include_dirs, out, included);
        out += "\n#line " + std::to_string(number + 1) + " \"" + file.name + "\"\n";
      } else {
        out += '\n'; // keeps the numbering
      }
    } else {
      out.append(line);
      out += '\n';
    }
    pos = end + 1;
  }
}

} // namespace

std::optional<std::string_view> embedded_source(std::string_view path) {
  for (const auto& s : detail::embedded_sources())
    if (s.path == path) return s.text;
  return std::nullopt;
}

std::string resolve_includes(std::string_view source, std::string_view source_name,
                             const std::vector<std::string>& include_dirs) {
  std::string out = "#line 1 \"" + std::string(source_name) + "\"\n";
  std::set<std::string> included;
  append_resolved(source_file{source, std::string(source_name), std::nullopt}, include_dirs, out, included);
  return out;
}

cl::Program program_cache::get(const device& dev, const std::string& source, const std::string& options,
                               const std::string& what) {
  std::lock_guard lock(mutex_);
  key k{source, options, dev.cl_device()()};
  if (auto it = programs_.find(k); it != programs_.end()) return it->second;

  cl::Program program = cl_call("clCreateProgramWithSource", [&] { return cl::Program(context_, source); });
  // The C call, not cl::Program::build: we want the status and the log, not CLHPP's exception.
  cl_device_id id = dev.cl_device()();
  const cl_int status = clBuildProgram(program(), 1, &id, options.c_str(), nullptr, nullptr);
  if (status == CL_BUILD_PROGRAM_FAILURE || status == CL_INVALID_BUILD_OPTIONS ||
      status == CL_COMPILE_PROGRAM_FAILURE) {
    std::string log;
    try {
      log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(dev.cl_device());
    } catch (const cl::Error&) {
      log = "(no build log)";
    }
    log = detail::log_at_source_lines(source, std::move(log));
    if (status == CL_INVALID_BUILD_OPTIONS) log = "invalid build options '" + options + "'\n" + log;
    throw build_error(what, dev.name(), log);
  }
  if (status != CL_SUCCESS) throw_opencl_error(status, "clBuildProgram");
  return programs_.emplace(std::move(k), program).first->second;
}

std::size_t program_cache::size() const {
  std::lock_guard lock(mutex_);
  return programs_.size();
}

std::optional<shelved_kernel> program_cache::take_kernel(const cl::Program& program, const std::string& name) {
  std::lock_guard lock(shelf_mutex_);
  const auto it = shelf_.find({program(), name});
  if (it == shelf_.end()) return std::nullopt;
  shelved_kernel k = std::move(it->second);
  shelf_.erase(it);
  return k;
}

void program_cache::shelve_kernel(const cl::Program& program, const std::string& name, shelved_kernel k) {
  std::lock_guard lock(shelf_mutex_);
  shelf_.emplace(std::pair{program(), name}, std::move(k));
}

std::size_t program_cache::shelved() const {
  std::lock_guard lock(shelf_mutex_);
  return shelf_.size();
}

std::string base_build_options(const device& dev) {
  const auto& info = dev.info();
  std::string options = info.cl_std;
  // Resident kernels need acquire/release atomics that the host sees; batched kernels run over a
  // snapshot the host copied and fall back to plain accesses where the device lacks them.
  if (info.c11_atomics) options += " -DRINGPIPE_C11_ATOMICS=1";
  if (info.loops_limited) options += " -DRINGPIPE_LOOPS_LIMITED=1";
  if (info.round_claim != 0) options += " -DRINGPIPE_ROUND_CLAIM=" + std::to_string(info.round_claim);
  // Devices that run only batched launches, where kernel_image compiles a map kernel's span form
  // by launching it (span.clh: RP_SPAN_COMPILE_ONLY); elsewhere the span form has no such test.
  if (!info.supports(kernel_mode::parked)) options += " -DRINGPIPE_BATCHED_ONLY=1";
  return options;
}

} // namespace ringpipe
