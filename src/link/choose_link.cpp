#include <ringpipe/link.hpp>

namespace ringpipe {

std::string_view to_string(link_kind k) noexcept {
  switch (k) {
  case link_kind::direct: return "direct";
  case link_kind::staged: return "staged";
  case link_kind::fused: return "fused";
  }
  return "?";
}

bool reaches_shared_memory(const device& d) noexcept { return d.info().svm.fine_buffer && d.info().svm.atomics; }

link_kind choose_link(link_end from, link_end to) noexcept {
  for (const auto* d : {from.dev, to.dev})
    if (d != nullptr && !reaches_shared_memory(*d)) return link_kind::staged;
  if (from.dev != nullptr && to.dev != nullptr && !from.dev->shares_context_with(*to.dev)) return link_kind::staged;
  return link_kind::direct;
}

std::string_view to_string(copy_path p) noexcept {
  switch (p) {
  case copy_path::shared: return "shared";
  case copy_path::device: return "device";
  case copy_path::staged: return "staged";
  }
  return "?";
}

copy_path choose_copy(link_end from, link_end to) noexcept {
  if (choose_link(from, to) == link_kind::direct) return copy_path::shared;
  if (from.dev == nullptr || to.dev == nullptr || from.dev->shares_context_with(*to.dev)) return copy_path::device;
  return copy_path::staged;
}

bool can_access(const device& a, const device& b) noexcept {
  return a.cl_device() == b.cl_device() || choose_link(a, b) == link_kind::direct;
}

} // namespace ringpipe
