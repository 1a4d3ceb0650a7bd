#pragma once
// Build logs that name the user's files. Sources are composed with #line directives, which most
// compilers honour; NVIDIA's OpenCL compiler ignores them and reports "<kernel>:LINE:COLUMN" in
// the composed text, so those places are translated back to the file and line they came from.

#include <string>
#include <string_view>

namespace ringpipe::detail {

/// `log` with every "<kernel>:L" (also "<source>:L", "<stdin>:L") that lies in `source` replaced by
/// the file and line the #line directives of `source` give that line.
std::string log_at_source_lines(std::string_view source, std::string log);

} // namespace ringpipe::detail
