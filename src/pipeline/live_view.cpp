// The live view: rates from the difference between two snapshots, drawn as a table redrawn in
// place (cursor up over the previous drawing, erase to the end of the screen) or as plain lines.

#include "../core/text.hpp"

#include <ringpipe/live_view.hpp>
#include <ringpipe/pipeline.hpp>

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>

namespace ringpipe {

namespace {

using detail::clip;
using detail::format;

std::string link_name(const link_metrics& l) { return l.from + " -> " + l.to; }

// "[###       ]  1201/4096": how full a stage's input queue is; "-" for a stage without one.
std::string queue_bar(const stage_metrics& s) {
  if (s.queue_capacity == 0) return "-";
  constexpr std::uint32_t width = 10;
  const std::uint32_t filled = std::min(width, (s.queue_fill * width + s.queue_capacity - 1) / s.queue_capacity);
  return "[" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " +
         format("%5u/%u", s.queue_fill, s.queue_capacity);
}

} // namespace

struct live_view::state {
  live_view_options options;
  bool table = false;
  std::mutex mutex; // show() runs on the runtime's thread, end() on the application's
  std::chrono::milliseconds every{0};
  bool ended = false;
  int drawn_lines = 0;                    // the table on the screen, to draw over
  std::optional<pipeline_metrics> before; // the snapshot drawn last, of pipeline `before_id`
  int before_id = 0;
  std::chrono::steady_clock::time_point drawn_at{};
  std::optional<std::pair<pipeline_metrics, int>> pending; // not drawn yet: too soon after the last
  int attached = 0;                                        // pipelines attached so far (their ids)

  // The rate of `now` over the time since `before`, or nullopt without a usable interval (none
  // when the elapsed time went back: another pipeline).
  std::optional<double> rate_since(std::uint64_t now, std::uint64_t then, double seconds) const {
    if (!before || seconds < 1e-3 || now < then) return std::nullopt;
    return static_cast<double>(now - then) / seconds;
  }
  std::string rate_text(std::optional<double> r) const { return r ? detail::rate(*r, "msgs") : "-"; }

  // A link's messages and bytes per second since the snapshot drawn before (none without one),
  // and its messages per second since the pipeline started (none before a second message: one
  // message over the whole run is no rate).
  struct link_rates {
    std::optional<double> now, bytes, average;
  };
  link_rates rates_of(const link_metrics& l, const pipeline_metrics& m, double dt) const {
    link_rates r;
    if (const link_metrics* b = before ? before->link(l.from, l.to) : nullptr) {
      r.now = rate_since(l.messages, b->messages, dt);
      r.bytes = rate_since(l.bytes, b->bytes, dt);
    }
    if (l.messages > 1 && m.elapsed_s > 0) r.average = static_cast<double>(l.messages) / m.elapsed_s;
    return r;
  }

  std::string draw_table(const pipeline_metrics& m, double dt) const {
    std::string t = format("\x1b[1m%s\x1b[0m  %.1f s\n", options.title.c_str(), m.elapsed_s);
    t += format("%-36s %-7s %-15s %-15s %-12s %s\n", "link", "kind", "now", "average", "bytes/s", "messages");
    for (const auto& l : m.links) {
      const auto r = rates_of(l, m, dt);
      t += format("%-36s %-7s %-15s %-15s %-12s %s\n", clip(link_name(l), 36).c_str(),
                  std::string(to_string(l.kind)).c_str(), rate_text(r.now).c_str(), rate_text(r.average).c_str(),
                  r.bytes ? detail::rate(*r.bytes, "B").c_str() : "-", detail::amount(l.messages, "").c_str());
    }
    t += format("%-24s %-12s %-15s %-15s %s\n", "stage", "state", "in now", "out now", "input queue");
    for (const auto& s : m.stages) {
      const stage_metrics* b = before ? before->stage(s.name) : nullptr;
      // A stage without an input queue (a source, a producing kernel) takes nothing in, a sink
      // puts nothing out: no rate rather than a zero.
      const bool takes = s.queue_capacity > 0, puts = s.kind != stage_kind::sink;
      const auto in = b && takes ? rate_since(s.msgs_in, b->msgs_in, dt) : std::nullopt;
      const auto out = b && puts ? rate_since(s.msgs_out, b->msgs_out, dt) : std::nullopt;
      t += format("%-24s %-12s %-15s %-15s %s\n", clip(s.name, 24).c_str(), clip(s.state, 12).c_str(),
                  rate_text(in).c_str(), rate_text(out).c_str(), queue_bar(s).c_str());
    }
    if (options.footer) t += options.footer() + "\n";
    return t;
  }

  std::string draw_lines(const pipeline_metrics& m, double dt) const {
    std::string t;
    const std::string prefix = format("%s [%.1f s] ", options.title.c_str(), m.elapsed_s);
    for (const auto& l : m.links) {
      const auto r = rates_of(l, m, dt);
      t += prefix + link_name(l) + " " + std::string(to_string(l.kind)) + ": " +
           (r.now ? rate_text(r.now) + " now, " : "") + (r.average ? rate_text(r.average) + " average, " : "") +
           detail::amount(l.messages, "msgs") + "\n";
    }
    if (options.footer) t += options.footer() + "\n"; // the application's own line
    return t;
  }

  // A snapshot of pipeline `id` (0: the application's own calls of show()). From the callback
  // (`throttled`), one that comes within half an interval of the last drawing (a pipeline's last
  // snapshot, or short pipelines one after another) waits for the next one or for end().
  void show(const pipeline_metrics& m, int id, bool throttled) {
    std::lock_guard lock(mutex);
    if (ended) return;
    if (throttled && before && std::chrono::steady_clock::now() - drawn_at < every / 2) {
      pending.emplace(m, id);
      return;
    }
    draw(m, id);
  }

  void draw(const pipeline_metrics& m, int id) {
    if (id != before_id) before.reset();
    const double dt = before ? m.elapsed_s - before->elapsed_s : 0;
    const std::string text = table ? draw_table(m, dt) : draw_lines(m, dt);
    if (table) erase();
    std::fputs(text.c_str(), options.out);
    std::fflush(options.out);
    if (table) drawn_lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    before = m;
    before_id = id;
    drawn_at = std::chrono::steady_clock::now();
    pending.reset();
  }

  void erase() {
    if (drawn_lines > 0) std::fprintf(options.out, "\r\x1b[%dA\x1b[J", drawn_lines);
    drawn_lines = 0;
  }
};

live_view::live_view(live_view_options options) : s_(std::make_shared<state>()) {
  s_->options = std::move(options);
  s_->table = s_->options.look == live_look::table ||
              (s_->options.look == live_look::automatic && isatty(fileno(s_->options.out)) != 0);
  using std::chrono::milliseconds;
  s_->every = s_->options.every.count() > 0 ? s_->options.every : s_->table ? milliseconds(250) : milliseconds(2000);
}

live_view::~live_view() { end(); }

bool live_view::draws_table() const noexcept { return s_->table; }

std::chrono::milliseconds live_view::every() const noexcept { return s_->every; }

void live_view::attach(pipeline_options& options) const {
  options.metrics_every = s_->every;
  std::lock_guard lock(s_->mutex);
  options.on_metrics = [s = s_, id = ++s_->attached](const pipeline_metrics& m) { s->show(m, id, true); };
}

void live_view::show(const pipeline_metrics& m) { s_->show(m, 0, false); }

void live_view::end() noexcept {
  std::lock_guard lock(s_->mutex);
  if (s_->ended) return;
  try {
    if (s_->pending)
      s_->draw(s_->pending->first, s_->pending->second);
    else if (s_->table && s_->options.keep && s_->options.footer && s_->drawn_lines > 0) // its totals now
      std::fprintf(s_->options.out, "\r\x1b[1A\x1b[J%s\n", s_->options.footer().c_str());
  } catch (...) { // a footer that threw, or no memory: the view ends without its last drawing
  }
  s_->ended = true;
  if (s_->table && !s_->options.keep) s_->erase();
  std::fflush(s_->options.out);
}

} // namespace ringpipe
