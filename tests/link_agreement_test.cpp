// What ringpipe-info reports is what pipelines build: for every ordered device pair of the
// environment, the kind `ringpipe-info --json` prints equals the kind of the link a two-kernel
// pipeline between those devices builds, and the pipeline carries every message over it.

#include <ringpipe/pipeline.hpp>
#include <test_message.hpp>

#include "device_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <string>

using namespace ringpipe;
using namespace std::chrono_literals;

namespace {

using msg = test_message<16>;

// (from, to) -> kind, as `ringpipe-info --json` prints them.
std::map<std::pair<std::size_t, std::size_t>, std::string> info_links() {
  std::string out;
  FILE* pipe = popen(RINGPIPE_INFO_PATH " --json", "r");
  if (pipe == nullptr) return {};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;)
    out.append(buf, n);
  pclose(pipe);
  std::map<std::pair<std::size_t, std::size_t>, std::string> links;
  const std::regex entry(R"re(\{"from": (\d+), "to": (\d+), "kind": "(\w+)"\})re");
  for (std::sregex_iterator it(out.begin(), out.end(), entry), end; it != end; ++it)
    links[{std::stoul((*it)[1]), std::stoul((*it)[2])}] = (*it)[3];
  return links;
}

class LinkAgreement : public ringpipe::testing::device_test {};

TEST_F(LinkAgreement, InfoReportsTheKindEveryTwoKernelPipelineBuilds) {
  const auto reported = info_links();
  const auto n = topo().size();
  ASSERT_EQ(reported.size(), n * n) << "ringpipe-info --json lists every ordered pair";
  constexpr std::uint32_t count = 2000;
  for (std::size_t from = 0; from < n; ++from) {
    for (std::size_t to = 0; to < n; ++to) {
      pipeline_options options;
      options.name = "pair";
      options.fuse_kernels = false; // two kernels, so that the link between them is a real one
      pipeline p(rt(), options);
      std::uint32_t next = 0, received = 0;
      auto src = p.add_source<msg>("src", [&]() -> std::optional<msg> {
        if (next == count) return std::nullopt;
        return make_test_message<16>(next++);
      });
      const kernel_spec spec(test_stages_source(16), "test_map");
      auto a = p.add_kernel<msg, msg>("a", spec, on_device(from));
      auto b = p.add_kernel<msg, msg>("b", spec, on_device(to));
      auto sink = p.add_sink<msg>("sink", [&](const msg& m) {
        if (m.seq == received && m.check == test_check_after(m.seq, 2)) ++received;
      });
      p.connect(src.out(), a.in());
      p.connect(a.out(), b.in());
      p.connect(b.out(), sink.in());
      p.run(2min);
      const auto m = p.metrics();
      const auto* link = m.link("a.out", "b.in");
      ASSERT_NE(link, nullptr);
      EXPECT_EQ(std::string(to_string(link->kind)), reported.at({from, to}))
          << topo()[from].label() << " -> " << topo()[to].label();
      EXPECT_EQ(link->kind, p.dry_run().find_link("a.out", "b.in")->kind);
      EXPECT_EQ(link->messages, count);
      // The copies the summary counts are the links' batches, and every staged link copied.
      std::uint64_t batches = 0;
      for (const auto& l : m.links) {
        batches += l.batches;
        if (l.kind == link_kind::staged) {
          EXPECT_GT(l.batches, 0u) << l.from << " -> " << l.to << " copied nothing";
        } else {
          EXPECT_EQ(l.batches, 0u) << l.from << " -> " << l.to;
        }
      }
      EXPECT_EQ(batches, m.copies) << m.table();
      // The transfer rows are the staged links' copies and bytes, per pair of ends.
      std::uint64_t staged_bytes = 0, transfer_copies = 0, transfer_bytes = 0;
      for (const auto& l : m.links)
        if (l.kind == link_kind::staged) staged_bytes += l.bytes;
      for (const auto& t : m.transfers.pairs) {
        EXPECT_EQ(t.path, copy_path::staged);
        transfer_copies += t.copies;
        transfer_bytes += t.bytes;
      }
      EXPECT_EQ(transfer_copies, m.copies) << m.table();
      EXPECT_EQ(transfer_bytes, staged_bytes) << m.table();
      if (link->kind == link_kind::staged) {
        EXPECT_NE(m.transfers.find(topo()[from].label(), topo()[to].label(), copy_path::staged), nullptr) << m.table();
      }
      EXPECT_EQ(received, count) << "every message once, in order, over " << to_string(link->kind);
    }
  }
}

} // namespace
