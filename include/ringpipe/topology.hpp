#pragma once
// Discovery of every platform and device, and the link kind between every ordered pair.

#include <ringpipe/device.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ringpipe {

/// How messages travel from a stage on one device to a stage on another.
enum class link_kind {
  direct, ///< both ends reach the same ring memory (same device, or shared fine-grained SVM)
  copy,   ///< same context without shared SVM: device-to-device buffer copies
  staged, ///< different platforms: a host actor copies through pinned host memory
  fused,  ///< pipelines only: both stages run in one kernel, no ring between them
};
std::string_view to_string(link_kind k) noexcept;

struct discovery_options {
  /// Keep only devices whose "platform: name" contains this text (case-insensitive); empty
  /// keeps all. Defaults to the RINGPIPE_DEVICE_FILTER environment variable.
  std::string device_filter = default_filter();
  static std::string default_filter();
};

/// A platform whose enumeration failed; it never hides the others.
struct platform_failure {
  std::string platform;
  std::string what;
};

class topology {
public:
  /// Enumerates every platform and device. Throws errc::no_platform when the ICD loader finds
  /// none, errc::no_device when no device is found or the filter matches none.
  static topology discover(const discovery_options& options = {});

  const std::vector<device>& devices() const noexcept { return devices_; }
  const device& operator[](std::size_t i) const { return devices_.at(i); }
  std::size_t size() const noexcept { return devices_.size(); }
  auto begin() const noexcept { return devices_.begin(); }
  auto end() const noexcept { return devices_.end(); }
  link_kind link(std::size_t from, std::size_t to) const { return links_.at(from * devices_.size() + to); }
  const std::vector<platform_failure>& failures() const noexcept { return failures_; }

private:
  std::vector<device> devices_;
  std::vector<link_kind> links_;
  std::vector<platform_failure> failures_;
};

/// The link kind the runtime uses between two devices.
link_kind choose_link(const device& from, const device& to);

} // namespace ringpipe
