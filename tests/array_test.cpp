// Device arrays: host <-> device and device <-> device copies on every device and ordered pair,
// byte-exact at awkward sizes, counted per pair and path; sub-ranges; arrays as kernel arguments;
// refusals; an array freed while its copy runs; a blocking read that times out never writes the
// caller's memory afterwards.
#include "device_fixture.hpp"

#include <ringpipe/array.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/ring.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <cstdint>
#include <map>
#include <thread>
#include <tuple>

using namespace ringpipe;
using namespace std::chrono_literals;
using ringpipe::testing::expect_error;

namespace {

const std::size_t sizes[] = {0, 1, 4095, (std::size_t{1} << 20) + 3};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 1u;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return v;
}

/// Copies and bytes per (from, to, path) that a test expects to add to the runtime's report.
class expected_transfers {
public:
  explicit expected_transfers(const runtime& rt) : before_(rt.transfers()) {}
  void add(const std::string& from, const std::string& to, copy_path path, std::size_t bytes) {
    auto& e = expected_[{from, to, path}];
    ++e.first;
    e.second += bytes;
  }
  void check(const runtime& rt) const {
    const auto after = rt.transfers();
    for (const auto& [key, want] : expected_) {
      const auto& [from, to, path] = key;
      const auto* a = after.find(from, to, path);
      ASSERT_NE(a, nullptr) << "no " << to_string(path) << " row " << from << " -> " << to;
      const auto* b = before_.find(from, to, path);
      EXPECT_EQ(a->copies - (b ? b->copies : 0), want.first) << from << " -> " << to << " " << to_string(path);
      EXPECT_EQ(a->bytes - (b ? b->bytes : 0), want.second) << from << " -> " << to << " " << to_string(path);
      EXPECT_EQ(a->failed - (b ? b->failed : 0), 0u);
    }
    EXPECT_EQ(after.total_copies() - before_.total_copies(), copies()) << "copies counted that were not made";
  }

private:
  std::uint64_t copies() const {
    std::uint64_t n = 0;
    for (const auto& [key, want] : expected_)
      n += want.first;
    return n;
  }
  transfer_report before_;
  std::map<std::tuple<std::string, std::string, copy_path>, std::pair<std::uint64_t, std::uint64_t>> expected_;
};

/// Every memory an array on `d` can be in: its default, and a buffer where the default is shared.
std::vector<std::optional<array_memory>> memories(const device& d) {
  if (reaches_shared_memory(d)) return {std::nullopt, array_memory::buffer};
  return {std::nullopt};
}

copy_path expected_path(const device* from, array_memory from_memory, const device* to, array_memory to_memory) {
  const auto end = [](const device* d) { return d ? link_end::on(*d) : link_end::host(); };
  const copy_path p = choose_copy(end(from), end(to));
  const bool buffers = from_memory == array_memory::buffer || to_memory == array_memory::buffer;
  return p == copy_path::shared && buffers ? copy_path::device : p;
}

class Arrays : public ringpipe::testing::device_test {};

} // namespace

TEST_F(Arrays, HostRoundTripOnEveryDeviceMemoryAndSize) {
  expected_transfers expected(rt());
  std::uint32_t seed = 1;
  for (const auto& d : topo()) {
    for (const auto memory : memories(d)) {
      for (const auto n : sizes) {
        device_array<std::uint8_t> a(rt(), d, n, "a", memory);
        const auto in = pattern(n, seed++);
        std::vector<std::uint8_t> out(n, 0);
        // Blocking forms: a write, then a read through a blocking call that may never leave the
        // caller's memory to a device command (counted as staged where the array is a buffer).
        a.write(in);
        a.read(out);
        EXPECT_EQ(out, in) << a.describe() << ": blocking round trip";
        const auto guarded = a.memory() == array_memory::buffer ? copy_path::staged : copy_path::shared;
        expected.add("host", d.label(), guarded, n);
        expected.add(d.label(), "host", guarded, n);
        // Asynchronous forms complete through a future; they copy straight from the caller's memory.
        const auto again = pattern(n, seed++);
        a.async_write(std::span<const std::uint8_t>(again), boost::asio::use_future).get();
        std::fill(out.begin(), out.end(), 0);
        a.async_read(std::span<std::uint8_t>(out), boost::asio::use_future).get();
        EXPECT_EQ(out, again) << a.describe() << ": asynchronous round trip";
        const auto direct = expected_path(nullptr, array_memory::shared, &d, a.memory());
        expected.add("host", d.label(), direct, n);
        expected.add(d.label(), "host", direct, n);
      }
    }
  }
  expected.check(rt());
}

TEST_F(Arrays, PeerCopyBetweenEveryOrderedPairIsByteExactOnItsPath) {
  expected_transfers expected(rt());
  std::uint32_t seed = 100;
  for (const auto& from : topo())
    for (const auto& to : topo())
      for (const auto from_memory : memories(from))
        for (const auto to_memory : memories(to))
          for (const auto n : sizes) {
            device_array<std::uint8_t> a(rt(), from, n, "src", from_memory), b(rt(), to, n, "dst", to_memory);
            const auto in = pattern(n, seed++);
            a.async_write(std::span<const std::uint8_t>(in), boost::asio::use_future).get();
            if (seed % 2 == 0)
              copy(a, b);
            else
              async_copy(a, b, boost::asio::use_future).get();
            std::vector<std::uint8_t> out(n, 0);
            b.async_read(std::span<std::uint8_t>(out), boost::asio::use_future).get();
            ASSERT_EQ(out, in) << a.describe() << " -> " << b.describe();
            expected.add("host", from.label(), expected_path(nullptr, array_memory::shared, &from, a.memory()), n);
            expected.add(from.label(), to.label(), expected_path(&from, a.memory(), &to, b.memory()), n);
            expected.add(to.label(), "host", expected_path(&to, b.memory(), nullptr, array_memory::shared), n);
          }
  expected.check(rt());
}

TEST_F(Arrays, DevicesOfOneSharedContextTakeTheSharedPathAndOthersAreStaged) {
  for (const auto& a : topo())
    for (const auto& b : topo()) {
      const bool same = a.cl_device() == b.cl_device();
      EXPECT_EQ(can_access(a, b), same || topo().link(a.index(), b.index()) == link_kind::direct);
      const copy_path p = choose_copy(link_end::on(a), link_end::on(b));
      if (!a.shares_context_with(b))
        EXPECT_EQ(p, copy_path::staged) << a.label() << " -> " << b.label();
      else if (reaches_shared_memory(a) && reaches_shared_memory(b))
        EXPECT_EQ(p, copy_path::shared);
      else
        EXPECT_EQ(p, copy_path::device);
    }
}

TEST_F(Arrays, SubRangesReadAndWriteTheirOwnBytes) {
  for (const auto& d : topo()) {
    device_array<std::uint32_t> a(rt(), d, 1000, "whole");
    std::vector<std::uint32_t> zeros(1000, 0), part(300, 7);
    a.write(zeros);
    const auto middle = a.sub(200, 300);
    EXPECT_EQ(middle.size(), 300u);
    middle.write(part);
    std::vector<std::uint32_t> out(1000);
    a.read(out);
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], i >= 200 && i < 500 ? 7u : 0u) << "element " << i << " on " << d.label();
    std::vector<std::uint32_t> back(300);
    middle.read(back);
    EXPECT_EQ(back, part);
    expect_error([&] { (void)a.sub(900, 101); }, make_error_code(errc::invalid_argument),
                 {"array 'whole'", "ends past its 4000 bytes"}, "a sub-range past the end was made");
  }
}

TEST_F(Arrays, BadSizesAndAllocationsAreRefusedWithTheSizes) {
  const auto& d = topo()[0];
  const auto too_many = d.info().max_alloc / 4 + 1;
  expect_error([&] { device_array<std::uint32_t> huge(rt(), d, too_many, "huge"); },
               make_error_code(errc::out_of_memory),
               {"array 'huge'", std::to_string(too_many * 4) + " bytes", std::to_string(d.info().max_alloc), d.label()},
               "an array larger than the device's largest allocation was made");
  device_array<std::uint32_t> a(rt(), d, 10, "ten"), b(rt(), d, 11, "eleven");
  std::vector<std::uint32_t> nine(9);
  expect_error([&] { a.write(nine); }, make_error_code(errc::invalid_argument), {"array 'ten'", "36 bytes", "40 bytes"},
               "a write of the wrong size was taken");
  expect_error([&] { copy(a, b); }, make_error_code(errc::invalid_argument), {"'ten'", "'eleven'", "sizes differ"},
               "a copy between arrays of different sizes was taken");
  const auto rusticl = ringpipe::testing::find_device(topo(), ringpipe::testing::is_rusticl);
  if (rusticl) {
    expect_error([&] { device_array<int> s(rt(), topo()[*rusticl], 4, "svm", array_memory::shared); },
                 make_error_code(errc::invalid_argument), {"array 'svm'", "no fine-grained SVM"},
                 "shared memory was given on a device without it");
  }
}

TEST_F(Arrays, AnArrayFreedWhileItsCopyRunsLivesUntilTheCopyEnds) {
  for (const auto& d : topo()) {
    const std::size_t n = std::size_t{16} << 20;
    const auto in = pattern(n, 7);
    device_array<std::uint8_t> kept(rt(), d, n, "kept");
    std::future<void> done;
    {
      device_array<std::uint8_t> dropped(rt(), d, n, "dropped", array_memory::buffer);
      dropped.write(in);
      done = async_copy(dropped, kept, boost::asio::use_future);
    } // the only handle is gone; the copy holds the memory
    done.get();
    std::vector<std::uint8_t> out(n);
    kept.read(out);
    EXPECT_TRUE(out == in) << d.label();
  }
}

TEST_F(Arrays, ABlockingReadThatTimesOutNeverWritesTheCallersMemoryLater) {
  const auto& d = topo()[topo().size() - 1];
  const std::size_t n = std::size_t{64} << 20; // 64 chunks: no copy this size ends within 0 ms
  device_array<std::uint8_t> a(rt(), d, n, "slow", array_memory::buffer);
  const auto before = rt().transfers();
  {
    std::vector<std::uint8_t> out(n);
    expect_error([&] { a.read(out, 0ms); }, make_error_code(errc::timeout),
                 {"read of 67108864 bytes from array 'slow'", d.label(), "did not finish within 0 ms"},
                 "a 64 MiB read finished within 0 ms");
  } // `out` is freed: the copy must not touch it again (AddressSanitizer watches)
  const auto failed = [&] {
    const auto now = rt().transfers();
    const auto* row = now.find(d.label(), "host", copy_path::staged);
    const auto* old = before.find(d.label(), "host", copy_path::staged);
    return row ? row->failed - (old ? old->failed : 0) : 0;
  };
  for (int i = 0; i < 1000 && failed() == 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(failed(), 1u) << "the abandoned read did not end as a failed copy";
}

// A runtime destroyed while a copy runs lets the copy end and its completion run, then exits.
// use_future's handler runs wherever it is dispatched but is posted to Asio's system thread pool:
// with that pool's threads all held, a completion posted there would still be waiting.
TEST_F(Arrays, ARuntimeDestroyedWhileACopyRunsDeliversItsCompletion) {
  std::future<void> done;
  std::vector<std::uint8_t> back;
  const unsigned pool_threads = 2 * std::max(1u, std::thread::hardware_concurrency()); // Asio's system_context
  for (unsigned i = 0; i < pool_threads + 1; ++i)
    boost::asio::post(boost::asio::system_executor(), [] { std::this_thread::sleep_for(300ms); });
  {
    runtime own(topology::discover(), runtime_options{2});
    const auto& d = own.device_at(own.devices().size() - 1);
    const std::size_t n = std::size_t{32} << 20;
    device_array<std::uint8_t> a(own, d, n, "a", array_memory::buffer), b(own, d, n, "b", array_memory::buffer);
    done = async_copy(a, b, boost::asio::use_future);
  } // arrays and runtime gone, the copy perhaps still running
  ASSERT_EQ(done.wait_for(0s), std::future_status::ready) << "the runtime returned before the copy's completion ran";
  EXPECT_NO_THROW(done.get());
}

TEST_F(Arrays, CopiesCompleteThroughCallbacksAndCoroutines) {
  const auto& d = topo()[0];
  device_array<int> a(rt(), d, 1000, "a"), b(rt(), d, 1000, "b");
  std::vector<int> in(1000), out(1000);
  for (int i = 0; i < 1000; ++i)
    in[static_cast<std::size_t>(i)] = i * 3;
  std::promise<std::exception_ptr> called;
  a.async_write(std::span<const int>(in), [&](const std::exception_ptr& e) { called.set_value(e); });
  EXPECT_EQ(called.get_future().get(), nullptr);
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  std::promise<void> finished;
  boost::asio::co_spawn(
      rt().io(),
      [&]() -> boost::asio::awaitable<void> {
        co_await async_copy(a, b, boost::asio::use_awaitable);
        co_await b.async_read(std::span<int>(out), boost::asio::use_awaitable);
        finished.set_value();
      },
      boost::asio::detached);
  ASSERT_EQ(finished.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(out, in);
#else
  GTEST_SKIP() << "this compiler gives Asio no coroutines: the callback form passed, the coroutine form is untested";
#endif
}

// A kernel reads a device array passed as its own argument: a lookup table, in shared memory or a
// buffer as the device has.
TEST_F(Arrays, AKernelTakesAnArrayAsItsArgument) {
  const std::string source = R"(
#include <ringpipe/stage.clh>
inline bool look_up(const uint* in, uint* out, __global const uint* table) {
  *out = table[*in & 255u] + *in;
  return true;
}
RINGPIPE_MAP_KERNEL_WITH_ARGS(look_up_kernel, uint, uint, __global const uint*, look_up)
)";
  for (const auto& d : topo()) {
    device_array<std::uint32_t> table(rt(), d, 256, "table");
    std::vector<std::uint32_t> values(256);
    for (std::uint32_t i = 0; i < 256; ++i)
      values[i] = i * 1000u;
    table.write(values);
    ring<std::uint32_t> in(d, 1024, {"in"}), out(d, 1024, {"out"});
    ring_kernel<std::uint32_t, std::uint32_t> k(rt(), d, kernel_spec(source, "look_up_kernel"));
    k.set_arg(0, table);
    k.start(in, out);
    for (std::uint32_t s = 0; s < 1000; ++s)
      in.push(s, 5s);
    in.close();
    k.notify();
    for (std::uint32_t s = 0; s < 1000; ++s) {
      std::uint32_t got = 0;
      ASSERT_TRUE(out.pop(got, 20s)) << d.label();
      ASSERT_EQ(got, (s & 255u) * 1000u + s) << "message " << s << " on " << d.label();
    }
    k.wait(20s);
  }
}
