// One end's MPI calls: frames, generations, and sends and receives posted, then tested on later
// turns until they complete or the timeout passes.

#include "link_io.hpp"
#include "mpi_call_lock.hpp"

#include <ringpipe/error.hpp>

#include <algorithm>
#include <cstring>

namespace ringpipe::mpi::detail {

namespace {
constexpr std::chrono::nanoseconds last_word_within = std::chrono::seconds(2);
constexpr std::chrono::nanoseconds busy_for = std::chrono::milliseconds(2);
} // namespace

link_io::link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout, std::function<bool()> give_up)
    : world_(w), peer_(peer), link_(link), timeout_(timeout), give_up_(std::move(give_up)), heard_(clock::now()),
      said_(clock::now()) {
  mpi_call_lock lock(world_);
  generation_ = ++world_.link_book().opened[{link_, peer_}];
}

link_io::~link_io() { // an end that did not finish its sends (the world ends): MPI may complete them
  for (auto& s : sends_)
    orphan({s.requests, static_cast<std::size_t>(s.n)}, std::move(s.header), false);
  orphan({&payload_, 1}, {}, true);
}

void link_io::orphan(std::span<MPI_Request> requests, std::vector<std::byte> header, bool cancel) noexcept {
  if (std::all_of(requests.begin(), requests.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) return;
  mpi_call_lock lock(world_);
  auto& book = world_.link_book();
  try {
    link_book::orphan o{{}, std::move(header), memory_};
    o.requests.reserve(requests.size());
    book.orphans.reserve(book.orphans.size() + 1); // nothing below throws once a request moved
    for (auto& r : requests) {
      if (r == MPI_REQUEST_NULL) continue;
      if (cancel) MPI_Cancel(&r);
      o.requests.push_back(std::exchange(r, MPI_REQUEST_NULL));
    }
    book.orphans.push_back(std::move(o));
    book.has_orphans.store(true, std::memory_order_relaxed);
  } catch (...) { // out of memory: left to MPI, with the memory (never freed under it)
    for (auto& r : requests)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    if (memory_) (void)new std::shared_ptr<const void>(memory_); // NOLINT: kept for good, on purpose
  }
}

void link_io::test_orphans(world& w) noexcept {
  auto& book = w.link_book();
  if (!book.has_orphans.load(std::memory_order_relaxed)) return;
  std::vector<link_book::orphan> done; // their memory is let go after the lock
  mpi_call_lock lock(w);
  for (auto o = book.orphans.begin(); o != book.orphans.end();) {
    int complete = 0;
    MPI_Testall(static_cast<int>(o->requests.size()), o->requests.data(), &complete, MPI_STATUSES_IGNORE);
    if (complete == 0) {
      ++o;
      continue;
    }
    done.push_back(std::move(*o));
    o = book.orphans.erase(o);
  }
  book.has_orphans.store(!book.orphans.empty(), std::memory_order_relaxed);
}

std::string link_io::where() const {
  return "remote link " + std::to_string(link_) + " with rank " + std::to_string(peer_);
}

void link_io::check(int status, const char* call) const {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw error(errc::remote_failed,
              where() + ": " + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

void link_io::send_header(frame_kind kind, std::uint32_t count, std::uint64_t value, bool forward) {
  const frame_header h{kind, count, value, generation_};
  std::vector<std::byte> bytes(sizeof h);
  std::memcpy(bytes.data(), &h, sizeof h);
  post(std::move(bytes), std::nullopt, forward, false);
}

void link_io::send_data(const std::byte* messages, std::size_t n, std::uint32_t slot) {
  const frame_header h{frame_kind::data, static_cast<std::uint32_t>(n), 0, generation_};
  const std::size_t data = n * slot;
  const bool inline_data = data <= inline_data_bytes;
  std::vector<std::byte> bytes(sizeof h + (inline_data ? data : 0));
  std::memcpy(bytes.data(), &h, sizeof h);
  if (inline_data) {
    std::memcpy(bytes.data() + sizeof h, messages, data);
    post(std::move(bytes), std::nullopt, true, false);
  } else {
    post(std::move(bytes), part{messages, data}, true, false);
  }
}

void link_io::send_text(frame_kind kind, const std::string& text, std::uint64_t value, bool forward) noexcept {
  try {
    const frame_header h{kind, static_cast<std::uint32_t>(text.size()), value, generation_};
    std::vector<std::byte> bytes(sizeof h + text.size());
    std::memcpy(bytes.data(), &h, sizeof h);
    std::memcpy(bytes.data() + sizeof h, text.data(), text.size());
    post(std::move(bytes), std::nullopt, forward, true);
  } catch (...) { // the peer may be gone: this end fails anyway
  }
}

void link_io::heartbeat_if_due(bool forward) {
  if (clock::now() - said_ < timeout_ / 4) return;
  send_header(frame_kind::heartbeat, 0, 0, forward);
}

void link_io::post(std::vector<std::byte> header, std::optional<part> data, bool forward, bool last_word) {
  outgoing o;
  o.header = std::move(header);
  o.started = said_ = clock::now();
  o.deadline = o.started + (last_word ? std::min<std::chrono::nanoseconds>(timeout_, last_word_within) : timeout_);
  o.data = data.has_value();
  o.last_word = last_word;
  mpi_call_lock lock(world_);
  check(MPI_Isend(o.header.data(), static_cast<int>(o.header.size()), MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD,
                  &o.requests[o.n++]),
        "MPI_Isend");
  if (data) {
    const int status = MPI_Isend(data->data, static_cast<int>(data->bytes), MPI_BYTE, peer_, tag(forward),
                                 MPI_COMM_WORLD, &o.requests[o.n++]);
    if (status != MPI_SUCCESS) MPI_Request_free(&o.requests[0]);
    check(status, "MPI_Isend");
  }
  sends_.push_back(std::move(o)); // the header's bytes stay where MPI reads them (a vector moves its buffer)
}

bool link_io::test_sends() {
  test_orphans(world_);
  bool completed = false;
  for (auto s = sends_.begin(); s != sends_.end();) {
    int done = 0;
    {
      mpi_call_lock lock(world_);
      check(MPI_Testall(s->n, s->requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    }
    if (done != 0) {
      s = sends_.erase(s);
      completed = true;
      continue;
    }
    const bool late = clock::now() > s->deadline, abandoned = !late && !s->last_word && give_up_ && give_up_();
    if (late || abandoned) {
      const auto limit = s->deadline - s->started;
      const bool last_word = s->last_word;
      orphan({s->requests, static_cast<std::size_t>(s->n)}, std::move(s->header), true);
      s = sends_.erase(s);
      if (last_word) continue; // the peer may be gone: this end fails anyway
      late_or_abandoned(late, "frame", limit);
    }
    ++s;
  }
  return completed;
}

bool link_io::data_in_flight() const noexcept {
  return std::any_of(sends_.begin(), sends_.end(), [](const outgoing& s) { return s.data; });
}

bool link_io::transfer_busy() const noexcept {
  const auto now = clock::now();
  if (payload_receiving_ && now - payload_started_ < busy_for) return true;
  return std::any_of(sends_.begin(), sends_.end(),
                     [&](const outgoing& s) { return s.data && now - s.started < busy_for; });
}

void link_io::abandon_transfers() noexcept {
  const auto last = clock::now() + std::min<std::chrono::nanoseconds>(timeout_, last_word_within);
  for (auto s = sends_.begin(); s != sends_.end();) {
    if (s->data) {
      orphan({s->requests, static_cast<std::size_t>(s->n)}, std::move(s->header), true);
      s = sends_.erase(s);
      continue;
    }
    s->last_word = true;
    s->deadline = std::min(s->deadline, last);
    ++s;
  }
  if (payload_receiving_) {
    orphan({&payload_, 1}, {}, true);
    payload_receiving_ = false;
  }
}

void link_io::late_or_abandoned(bool late, const char* what, std::chrono::nanoseconds limit) {
  if (!late)
    throw error(errc::remote_failed, where() + ": a " + what + " abandoned before rank " + std::to_string(peer_) +
                                         " completed it (the link ended here)");
  throw error(errc::remote_failed, where() + ": rank " + std::to_string(peer_) + " did not complete a " + what +
                                       " within " + std::to_string(limit.count() / 1000000) + " ms");
}

frame link_io::read(const std::vector<std::byte>& raw) {
  if (raw.size() < sizeof(frame_header)) throw error(errc::remote_failed, where() + ": a frame too short to read");
  frame f;
  std::memcpy(static_cast<frame_header*>(&f), raw.data(), sizeof(frame_header));
  f.payload.assign(raw.begin() + sizeof(frame_header), raw.end());
  f.payload_follows = f.kind == frame_kind::data && raw.size() == sizeof(frame_header);
  heard_ = clock::now();
  return f;
}

// Receives the message `status` probed (the caller holds the lock).
std::vector<std::byte> link_io::take(MPI_Status& status, bool forward) {
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  std::vector<std::byte> raw(static_cast<std::size_t>(bytes));
  check(MPI_Recv(raw.data(), bytes, MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  return raw;
}

std::optional<frame> link_io::poll(bool forward) {
  test_orphans(world_);
  mpi_call_lock lock(world_);
  auto& book = world_.link_book();
  const auto from = std::make_pair(peer_, tag(forward));
  if (const auto kept = book.early.find({peer_, tag(forward), generation_}); kept != book.early.end()) {
    auto raw = std::move(kept->second.front());
    kept->second.pop_front();
    if (kept->second.empty()) book.early.erase(kept);
    return read(raw);
  }
  for (;;) {
    int flag = 0;
    MPI_Status status;
    check(MPI_Iprobe(peer_, tag(forward), MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    auto raw = take(status, forward);
    std::uint32_t generation = 0;
    if (const auto owner = book.payload_next.find(from); owner != book.payload_next.end()) {
      generation = owner->second; // the messages of another generation's data frame
      book.payload_next.erase(owner);
    } else {
      if (raw.size() < sizeof(frame_header)) throw error(errc::remote_failed, where() + ": a frame too short to read");
      frame_header h;
      std::memcpy(&h, raw.data(), sizeof h);
      if (h.generation == generation_) return read(raw);
      generation = h.generation;
      if (h.kind == frame_kind::data && raw.size() == sizeof h) book.payload_next[from] = h.generation;
    }
    if (generation > generation_) book.early[{peer_, tag(forward), generation}].push_back(std::move(raw));
  }
}

void link_io::receive_payload(std::span<std::byte> first, std::span<std::byte> second, bool forward) {
  mpi_call_lock lock(world_);
  auto& book = world_.link_book();
  if (const auto kept = book.early.find({peer_, tag(forward), generation_}); kept != book.early.end()) {
    const auto raw = std::move(kept->second.front()); // came before this link opened here
    kept->second.pop_front();
    if (kept->second.empty()) book.early.erase(kept);
    if (raw.size() != first.size() + second.size())
      throw error(errc::remote_failed, where() + ": a data frame of the wrong size");
    std::memcpy(first.data(), raw.data(), first.size());
    if (!second.empty()) std::memcpy(second.data(), raw.data() + first.size(), second.size());
    return;
  }
  book.payload_next.erase({peer_, tag(forward)});
  if (second.empty()) {
    check(MPI_Irecv(first.data(), static_cast<int>(first.size()), MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD,
                    &payload_),
          "MPI_Irecv");
  } else { // one message into two pieces: a type of two blocks at absolute addresses
    const int lengths[2] = {static_cast<int>(first.size()), static_cast<int>(second.size())};
    MPI_Aint at[2];
    MPI_Get_address(first.data(), &at[0]);
    MPI_Get_address(second.data(), &at[1]);
    MPI_Datatype pieces = MPI_DATATYPE_NULL;
    check(MPI_Type_create_hindexed(2, lengths, at, MPI_BYTE, &pieces), "MPI_Type_create_hindexed");
    MPI_Type_commit(&pieces);
    const int status = MPI_Irecv(MPI_BOTTOM, 1, pieces, peer_, tag(forward), MPI_COMM_WORLD, &payload_);
    MPI_Type_free(&pieces); // freed once the receive no longer needs it
    check(status, "MPI_Irecv");
  }
  first_ = first;
  second_ = second;
  payload_started_ = clock::now();
  payload_receiving_ = true;
}

bool link_io::payload_done() {
  if (!payload_receiving_) return true;
  int done = 0;
  MPI_Status status;
  {
    mpi_call_lock lock(world_);
    check(MPI_Test(&payload_, &done, &status), "MPI_Test");
  }
  if (done == 0) {
    const bool late = clock::now() > payload_started_ + timeout_, abandoned = !late && give_up_ && give_up_();
    if (late || abandoned) {
      orphan({&payload_, 1}, {}, true);
      payload_receiving_ = false;
      late_or_abandoned(late, "data", timeout_);
    }
    return false;
  }
  payload_receiving_ = false;
  heard_ = clock::now();
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) == first_.size() + second_.size()) return true;
  // Shorter: the next message on the tag, a frame, matched the receive instead of the messages.
  std::vector<std::byte> raw(static_cast<std::size_t>(got));
  const auto from_first = std::min(raw.size(), first_.size());
  std::memcpy(raw.data(), first_.data(), from_first);
  std::memcpy(raw.data() + from_first, second_.data(), raw.size() - from_first);
  instead_ = read(raw);
  return true;
}

} // namespace ringpipe::mpi::detail
