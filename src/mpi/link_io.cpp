// One end's MPI calls: frames, generations, and sends and receives bounded by the timeout.

#include "link_io.hpp"

#include <ringpipe/error.hpp>

#include <cstring>

namespace ringpipe::mpi::detail {

namespace {
constexpr std::chrono::nanoseconds last_word = std::chrono::seconds(2);
constexpr std::chrono::nanoseconds busy_for = std::chrono::milliseconds(2);
} // namespace

link_io::link_io(world& w, int peer, int link, std::chrono::nanoseconds timeout, std::chrono::nanoseconds spin,
                 std::function<bool()> give_up)
    : world_(w), peer_(peer), link_(link), timeout_(timeout), spin_(spin), give_up_(std::move(give_up)),
      heard_(clock::now()), said_(clock::now()) {
  std::lock_guard lock(world_.lock());
  generation_ = ++world_.link_book().opened[{link_, peer_}];
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
  send({{&h, sizeof h}}, forward, std::nullopt);
}

void link_io::send_data(const std::byte* messages, std::size_t n, std::uint32_t slot) {
  const frame_header h{frame_kind::data, static_cast<std::uint32_t>(n), 0, generation_};
  send({{&h, sizeof h}, {messages, n * slot}}, true, std::nullopt);
}

void link_io::send_text(frame_kind kind, const std::string& text, std::uint64_t value, bool forward) noexcept {
  try {
    const frame_header h{kind, static_cast<std::uint32_t>(text.size()), value, generation_};
    header_.resize(sizeof h + text.size());
    std::memcpy(header_.data(), &h, sizeof h);
    std::memcpy(header_.data() + sizeof h, text.data(), text.size());
    send({{header_.data(), header_.size()}}, forward, std::min<std::chrono::nanoseconds>(timeout_, last_word));
  } catch (...) { // the peer may be gone: this end fails anyway
  }
}

void link_io::heartbeat_if_due(bool forward) {
  if (clock::now() - said_ < timeout_ / 4) return;
  send_header(frame_kind::heartbeat, 0, 0, forward);
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
  std::lock_guard lock(world_.lock());
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

std::optional<frame> link_io::receive_payload(std::span<std::byte> first, std::span<std::byte> second, bool forward) {
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(world_.lock());
    auto& book = world_.link_book();
    if (const auto kept = book.early.find({peer_, tag(forward), generation_}); kept != book.early.end()) {
      const auto raw = std::move(kept->second.front()); // came before this link opened here
      kept->second.pop_front();
      if (kept->second.empty()) book.early.erase(kept);
      if (raw.size() != first.size() + second.size())
        throw error(errc::remote_failed, where() + ": a data frame of the wrong size");
      std::memcpy(first.data(), raw.data(), first.size());
      if (!second.empty()) std::memcpy(second.data(), raw.data() + first.size(), second.size());
      return std::nullopt;
    }
    book.payload_next.erase({peer_, tag(forward)});
    if (second.empty()) {
      check(MPI_Irecv(first.data(), static_cast<int>(first.size()), MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD,
                      &request),
            "MPI_Irecv");
    } else { // one message into two pieces: a type of two blocks at absolute addresses
      const int lengths[2] = {static_cast<int>(first.size()), static_cast<int>(second.size())};
      MPI_Aint at[2];
      MPI_Get_address(first.data(), &at[0]);
      MPI_Get_address(second.data(), &at[1]);
      MPI_Datatype pieces = MPI_DATATYPE_NULL;
      check(MPI_Type_create_hindexed(2, lengths, at, MPI_BYTE, &pieces), "MPI_Type_create_hindexed");
      MPI_Type_commit(&pieces);
      const int status = MPI_Irecv(MPI_BOTTOM, 1, pieces, peer_, tag(forward), MPI_COMM_WORLD, &request);
      MPI_Type_free(&pieces); // freed once the receive no longer needs it
      check(status, "MPI_Irecv");
    }
  }
  MPI_Status status;
  complete(&request, 1, std::nullopt, "data", &status);
  heard_ = clock::now();
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) == first.size() + second.size()) return std::nullopt;
  // Shorter: the next message on the tag, a frame, matched the receive instead of the messages.
  std::vector<std::byte> raw(static_cast<std::size_t>(got));
  const auto from_first = std::min(raw.size(), first.size());
  std::memcpy(raw.data(), first.data(), from_first);
  std::memcpy(raw.data() + from_first, second.data(), raw.size() - from_first);
  return read(raw);
}

void link_io::send(std::initializer_list<part> parts, bool forward, std::optional<std::chrono::nanoseconds> last) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int n = 0;
  {
    std::lock_guard lock(world_.lock());
    for (const auto& p : parts)
      check(MPI_Isend(p.data, static_cast<int>(p.bytes), MPI_BYTE, peer_, tag(forward), MPI_COMM_WORLD, &requests[n++]),
            "MPI_Isend");
  }
  complete(requests, n, last, "frame");
  said_ = clock::now();
}

// Tests the requests, with the lock taken only around each test, until they complete, the time
// runs out, or give_up says the link ended here.
void link_io::complete(MPI_Request* requests, int n, std::optional<std::chrono::nanoseconds> last, const char* what,
                       MPI_Status* statuses) {
  const auto started = clock::now(), deadline = started + last.value_or(timeout_);
  pacer pace(spin_);
  for (;;) {
    int done = 0;
    {
      std::lock_guard lock(world_.lock());
      check(MPI_Testall(n, requests, &done, statuses != nullptr ? statuses : MPI_STATUSES_IGNORE), "MPI_Testall");
    }
    if (done != 0) return;
    const bool late = clock::now() > deadline, abandoned = !late && !last && give_up_ && give_up_();
    if (late || abandoned) {
      {
        std::lock_guard lock(world_.lock());
        for (int i = 0; i < n; ++i)
          if (requests[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&requests[i]);
            MPI_Request_free(&requests[i]);
          }
      }
      if (abandoned)
        throw error(errc::remote_failed, where() + ": a " + what + " abandoned before rank " + std::to_string(peer_) +
                                             " completed it (the link ended here)");
      throw error(errc::remote_failed, where() + ": rank " + std::to_string(peer_) + " did not complete a " + what +
                                           " within " + std::to_string(last.value_or(timeout_).count() / 1000000) +
                                           " ms");
    }
    // A transfer under way completes in MPI's progress, which runs in these tests: test again at
    // once for a while (a 4 MiB frame takes about a millisecond; yielding between tests made big
    // messages 4x slower), then pace like an idle link.
    if (clock::now() - started > busy_for) pace.idle();
  }
}

} // namespace ringpipe::mpi::detail
