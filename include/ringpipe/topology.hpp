#pragma once
// Discovery of every platform and device, and the link kind between every ordered pair.

#include <ringpipe/device.hpp>
#include <ringpipe/link.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ringpipe {

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
  /// A topology of devices described by the caller (e.g. a test describing machines it does not
  /// have): planning needs no OpenCL call. Indices are their positions.
  static topology from_devices(std::vector<device> devices);

  const std::vector<device>& devices() const noexcept { return devices_; }
  const device& operator[](std::size_t i) const { return devices_.at(i); }
  std::size_t size() const noexcept { return devices_.size(); }
  auto begin() const noexcept { return devices_.begin(); }
  auto end() const noexcept { return devices_.end(); }
  /// The kind choose_link() gives a link from a kernel on device `from` to one on device `to`.
  link_kind link(std::size_t from, std::size_t to) const { return choose_link(devices_.at(from), devices_.at(to)); }
  const std::vector<platform_failure>& failures() const noexcept { return failures_; }

private:
  std::vector<device> devices_;
  std::vector<platform_failure> failures_;
};

} // namespace ringpipe
