#include <ringpipe/detail/embedded_sources.hpp>
#include <ringpipe/device.hpp>
#include <ringpipe/program.hpp>

#include <set>

namespace ringpipe {
namespace {

// Pastes `source` (named `file` in diagnostics) with its embedded includes resolved. #line
// directives keep every line attributed to its own file: after an included file, numbering
// resumes in the includer at the line after the #include.
void append_resolved(std::string_view source, std::string_view file, std::string& out,
                     std::set<std::string_view>& included) {
  std::size_t pos = 0;
  std::size_t number = 0; // of the current line in `file`
  while (pos < source.size()) {
    ++number;
    auto end = source.find('\n', pos);
    if (end == std::string_view::npos) end = source.size();
    const auto line = source.substr(pos, end - pos);
    const auto first = line.find_first_not_of(" \t");
    const bool include = first != std::string_view::npos && line.substr(first).starts_with("#include");
    if (include) {
      const auto open = line.find_first_of("<\"", first);
      const auto close = open == std::string_view::npos ? open : line.find_first_of(">\"", open + 1);
      if (close == std::string_view::npos)
        throw error(errc::invalid_argument, "malformed #include in kernel source: " + std::string(line));
      const auto path = line.substr(open + 1, close - open - 1);
      const auto text = embedded_source(path);
      if (!text) {
        throw error(errc::invalid_argument,
                    "kernel source includes '" + std::string(path) + "', which is not an embedded cl/ file");
      }
      if (included.insert(path).second) {
        out += "#line 1 \"" + std::string(path) + "\"\n";
        append_resolved(*text, path, out, included);
        out += "\n#line " + std::to_string(number + 1) + " \"" + std::string(file) + "\"\n";
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

std::string resolve_includes(std::string_view source, std::string_view source_name) {
  std::string out = "#line 1 \"" + std::string(source_name) + "\"\n";
  std::set<std::string_view> included;
  append_resolved(source, source_name, out, included);
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

std::string base_build_options(const device& dev) {
  const auto& info = dev.info();
  std::string options = info.cl_std;
  // Resident kernels need acquire/release atomics that the host sees; batched kernels run over a
  // snapshot the host copied and fall back to plain accesses where the device lacks them.
  if (info.c11_atomics) options += " -DRINGPIPE_C11_ATOMICS=1";
  return options;
}

} // namespace ringpipe
