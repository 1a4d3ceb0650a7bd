// The live view: rates computed from two snapshots, the table redrawn in place on a terminal,
// plain lines elsewhere, a fresh start for the next pipeline, and a real pipeline followed to its
// final counts.
#include <ringpipe/live_view.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/runtime.hpp>
#include <test_message.hpp>

#include "pipeline_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace ringpipe;

namespace {

// Everything a view writes, read back when the view is done.
class captured {
public:
  captured() : file_(open_memstream(&data_, &size_)) {}
  ~captured() {
    std::fclose(file_);
    std::free(data_);
  }
  captured(const captured&) = delete;
  captured& operator=(const captured&) = delete;
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return {data_, size_};
  }

private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::FILE* file_;
};

// A snapshot of a two-stage pipeline "a" -> "b" after `seconds`, with `messages` of 16 bytes moved.
pipeline_metrics snapshot(double seconds, std::uint64_t messages, std::uint32_t fill = 0) {
  pipeline_metrics m;
  m.elapsed_s = seconds;
  stage_metrics a, b;
  a.name = "a", a.kind = stage_kind::source, a.state = "running", a.msgs_out = messages;
  b.name = "b", b.kind = stage_kind::sink, b.state = "running", b.msgs_in = messages;
  b.queue_fill = fill, b.queue_capacity = 4096;
  m.stages = {a, b};
  link_metrics l;
  l.from = "a.out", l.to = "b.in", l.messages = messages, l.bytes = 16 * messages;
  m.links = {l};
  return m;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(LiveViewRendering, ATableOfRatesNowAndOnAverageIsRedrawnInPlace) {
  captured out;
  live_view view({.title = "demo", .out = out.file(), .look = live_look::table});
  ASSERT_TRUE(view.draws_table());
  EXPECT_EQ(view.every().count(), 250);
  view.show(snapshot(1.0, 1'000'000, 1024));
  const std::string first = out.text();
  const auto lines = count_of(first, "\n");
  EXPECT_NE(first.find("a.out -> b.in"), std::string::npos) << first;
  EXPECT_NE(first.find("1 M msgs/s"), std::string::npos) << "the average over the first second\n" << first;
  EXPECT_NE(first.find("[###       ]  1024/4096"), std::string::npos) << "b's queue a quarter full\n" << first;

  view.show(snapshot(2.0, 3'000'000));
  const std::string second = out.text().substr(first.size());
  EXPECT_EQ(second.rfind("\r\x1b[" + std::to_string(lines) + "A\x1b[J", 0), 0u)
      << "the second drawing does not start over the first one's " << lines << " lines";
  EXPECT_NE(second.find("2 M msgs/s"), std::string::npos) << "2 M messages in the last second\n" << second;
  EXPECT_NE(second.find("1.5 M msgs/s"), std::string::npos) << "3 M messages in 2 s on average\n" << second;
  EXPECT_NE(second.find("32 MB/s"), std::string::npos) << second;
  EXPECT_NE(second.find("a                        running      -               2 M msgs/s      -\n"), std::string::npos)
      << "a source has no input rate and no queue\n"
      << second;
  EXPECT_NE(second.find("[          ]     0/4096"), std::string::npos) << second;
}

TEST(LiveViewRendering, PlainLinesCarryNoEscapeCodesAndEndWithTheFooter) {
  captured out;
  int footers = 0;
  live_view view({.title = "soak", .out = out.file(), .look = live_look::lines, .footer = [&] {
                    return "run " + std::to_string(++footers);
                  }});
  EXPECT_FALSE(view.draws_table());
  EXPECT_EQ(view.every().count(), 2000);
  view.show(snapshot(1.0, 500));
  view.show(snapshot(3.0, 4500));
  view.end();
  view.show(snapshot(4.0, 9000)); // after end(): not drawn
  const std::string text = out.text();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text, "soak [1.0 s] a.out -> b.in direct: 500 msgs/s average, 500 msgs\n"
                  "run 1\n"
                  "soak [3.0 s] a.out -> b.in direct: 2 k msgs/s now, 1.5 k msgs/s average, 4.5 k msgs\n"
                  "run 2\n");
}

// One message over a run is no rate: a link that carried one (a summary at the end) shows its
// count and no average, in lines and in the table.
TEST(LiveViewRendering, ALinkWithASingleMessageShowsNoAverage) {
  captured lines;
  live_view plain({.title = "end", .out = lines.file(), .look = live_look::lines});
  plain.show(snapshot(2.0, 1));
  EXPECT_EQ(lines.text(), "end [2.0 s] a.out -> b.in direct: 1 msg\n");

  captured table;
  live_view drawn({.title = "end", .out = table.file(), .look = live_look::table});
  drawn.show(snapshot(2.0, 1));
  EXPECT_EQ(table.text().find("msgs/s"), std::string::npos) << table.text();
  EXPECT_NE(table.text().find("a.out -> b.in                        direct  -               -               -"),
            std::string::npos)
      << table.text();
}

TEST(LiveViewRendering, TheNextPipelineStartsItsRatesAfreshAndEndErasesUnlessKept) {
  captured out;
  {
    live_view view({.out = out.file(), .look = live_look::lines});
    view.show(snapshot(2.0, 2000));
    view.show(snapshot(0.5, 100)); // elapsed went back: another pipeline, no rate yet
  }
  EXPECT_NE(out.text().find("[0.5 s] a.out -> b.in direct: 200 msgs/s average"), std::string::npos) << out.text();

  captured kept;
  int runs = 0;
  live_view footed({.out = kept.file(), .look = live_look::table, .footer = [&] { return std::to_string(++runs); }});
  footed.show(snapshot(1.0, 10));
  footed.end();
  EXPECT_EQ(kept.text().substr(kept.text().size() - 10), "\r\x1b[1A\x1b[J2\n") << "end() redraws the footer";

  captured table;
  live_view erased({.out = table.file(), .look = live_look::table, .keep = false});
  erased.show(snapshot(1.0, 10));
  const auto lines = count_of(table.text(), "\n");
  erased.end();
  const std::string text = table.text();
  EXPECT_EQ(text.substr(text.size() - 8), "\r\x1b[" + std::to_string(lines) + "A\x1b[J") << "not erased";
}

TEST(LiveViewRendering, AttachedPipelinesAreToldApartAndASnapshotTooSoonWaitsForEnd) {
  captured out;
  live_view view(
      {.title = "soak", .out = out.file(), .look = live_look::lines, .every = std::chrono::milliseconds(400)});
  pipeline_options first, second;
  view.attach(first);
  view.attach(second);
  first.on_metrics(snapshot(1.0, 1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  second.on_metrics(snapshot(1.5, 2000)); // another pipeline: no rate against the first one
  second.on_metrics(snapshot(2.5, 4000)); // within half an interval: kept back
  const std::string drawn = out.text();
  EXPECT_EQ(count_of(drawn, "\n"), 2u) << drawn;
  EXPECT_NE(drawn.find("[1.5 s] a.out -> b.in direct: 1.33 k msgs/s average, 2 k msgs"), std::string::npos) << drawn;
  view.end();
  EXPECT_EQ(out.text().substr(drawn.size()),
            "soak [2.5 s] a.out -> b.in direct: 2 k msgs/s now, 1.6 k msgs/s average, 4 k msgs\n")
      << "end() draws the snapshot kept back";

  captured later;
  live_view again({.out = later.file(), .look = live_look::lines, .every = std::chrono::milliseconds(400)});
  pipeline_options one;
  again.attach(one);
  one.on_metrics(snapshot(1.0, 1000));
  one.on_metrics(snapshot(1.1, 1100)); // kept back, then overtaken by the next drawing
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  one.on_metrics(snapshot(2.0, 3000));
  again.end();
  EXPECT_EQ(count_of(later.text(), "\n"), 2u) << "a snapshot kept back was drawn after a later one\n" << later.text();
}

using ringpipe::testing::counting_source;
using ringpipe::testing::PipelineTest;
using msg = test_message<16>;

TEST_F(PipelineTest, LiveViewMetricsFollowARunningPipelineToItsFinalCounts) {
  captured out;
  live_view view({.title = "run", .out = out.file(), .look = live_look::lines, .every = std::chrono::milliseconds(20)});
  pipeline_options options{.name = "followed"};
  view.attach(options);
  EXPECT_EQ(options.metrics_every.count(), 20);
  pipeline p(rt(), options);
  auto src = p.add_source<msg>("source", counting_source(200));
  auto sink = p.add_sink<msg>("sink", [](const msg&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  p.connect(src.out(), sink.in());
  p.run();
  view.end();
  const std::string text = out.text();
  EXPECT_GE(count_of(text, "source.out -> sink.in direct"), 3u) << "a 200 ms run drawn every 20 ms\n" << text;
  const auto last = text.rfind("run [");
  ASSERT_NE(last, std::string::npos) << text;
  EXPECT_NE(text.find(", 200 msgs\n", last), std::string::npos) << "the last line has the final count\n" << text;
}

} // namespace
