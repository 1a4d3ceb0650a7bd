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

} // namespace ringpipe
