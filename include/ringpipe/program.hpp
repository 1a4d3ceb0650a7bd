#pragma once
// Kernel programs: sources composed from the embedded cl/ tree, built once per context, device
// and options, with build failures reported with the kernel's name and the compiler's log.

#include <ringpipe/error.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ringpipe {

class device;

/// The text of an embedded cl/ file ("ringpipe/ring.clh", "stages/echo.cl"), if there is one.
std::optional<std::string_view> embedded_source(std::string_view path);

/// Replaces each `#include <path>` or `#include "path"` with that file's text, recursively and once
/// per file (as if every file had include guards). `"path"` is looked for in the including file's
/// directory (files read from disk), then in `include_dirs`, then among the embedded files;
/// `<path>` among the embedded files, then in `include_dirs`. Throws errc::invalid_argument,
/// naming the file and line and where it looked, for an include it cannot find.
/// `source_name` is what diagnostics call the source (the user's file name): `#line` directives
/// make every build error point at the file and line it comes from.
std::string resolve_includes(std::string_view source, std::string_view source_name = "kernel source",
                             const std::vector<std::string>& include_dirs = {});

/// A kernel object put back for reuse, with what its last user noted of it.
struct shelved_kernel {
  cl::Kernel kernel;
  std::uint64_t note = 0; ///< the user's own record (e.g. the group sizes it was compiled for)
};

/// Programs built in one context, keyed on (source, build options, device), and kernel objects of
/// them that stages released, for the next stage that runs the same kernel.
class program_cache {
public:
  explicit program_cache(cl::Context context) : context_(std::move(context)) {}

  /// Builds `source` (includes already resolved) for `dev` with `options`, or returns the cached
  /// program. `what` names the kernel in a build_error.
  cl::Program get(const device& dev, const std::string& source, const std::string& options, const std::string& what);
  std::size_t size() const;

  /// A kernel object of `program` named `name` that an earlier user shelved, or nothing. Creating
  /// one costs milliseconds on some drivers (Mesa's rusticl lowers the kernel at clCreateKernel
  /// and compiles it at its first launch), which every start of a pipeline paid.
  std::optional<shelved_kernel> take_kernel(const cl::Program& program, const std::string& name);
  /// Keeps `k` for the next take_kernel of the same program and name. The caller clears the
  /// arguments that hold memory first (the object would keep that memory alive) and shelves only
  /// a kernel no launch still runs.
  void shelve_kernel(const cl::Program& program, const std::string& name, shelved_kernel k);
  /// Kernel objects on the shelf now.
  std::size_t shelved() const;

private:
  using key = std::tuple<std::string, std::string, cl_device_id>;
  cl::Context context_;
  mutable std::mutex mutex_;
  std::map<key, cl::Program> programs_;
  mutable std::mutex shelf_mutex_; // apart from mutex_, which a build holds for its length
  std::multimap<std::pair<cl_program, std::string>, shelved_kernel> shelf_;
};

/// Options every ring-kernel program is built with on `dev` (language version, ringpipe defines).
std::string base_build_options(const device& dev);

} // namespace ringpipe
