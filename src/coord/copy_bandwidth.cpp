#include <ringpipe/array.hpp>
#include <ringpipe/copy_bandwidth.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>

namespace ringpipe {
namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::size_t repeats(std::size_t bytes, const copy_bandwidth_options& o) {
  return std::clamp<std::size_t>(o.budget_bytes / std::max<std::size_t>(bytes, 1) / 8, 3, 200);
}

/// Median microseconds of `copy_once()` over `n` runs after one warm-up.
template <class F> double time_us(std::size_t n, F&& copy_once) {
  copy_once();
  std::vector<double> us;
  for (std::size_t i = 0; i < n; ++i) {
    const auto t0 = clock_type::now();
    copy_once();
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return median(us);
}

void wait(const std::function<void(copy_completion)>& start) {
  std::promise<void> done;
  start([&](const std::exception_ptr& e) {
    if (e)
      done.set_exception(e);
    else
      done.set_value();
  });
  done.get_future().get();
}

} // namespace

std::vector<copy_measurement> measure_copy_bandwidth(runtime& rt, const copy_bandwidth_options& o) {
  std::vector<copy_measurement> out;
  const auto& devices = rt.devices();
  const std::size_t ends = devices.size() + 1; // 0: the host
  for (const auto bytes : o.sizes) {
    const std::size_t n = repeats(bytes, o);
    std::vector<std::byte> a(bytes, std::byte{1}), b(bytes);
    const double memcpy_us = time_us(n, [&] { std::memcpy(b.data(), a.data(), bytes); });
    const double memcpy_rate = static_cast<double>(bytes) / memcpy_us / 1e3;
    for (std::size_t i = 0; i < ends; ++i)
      for (std::size_t j = 0; j < ends; ++j) {
        if (i == 0 && j == 0) continue;
        copy_measurement m;
        m.from_index = i;
        m.to_index = j;
        m.from = i == 0 ? "host" : devices[i - 1].label();
        m.to = j == 0 ? "host" : devices[j - 1].label();
        m.bytes = bytes;
        m.memcpy_gb_per_s = memcpy_rate;
        std::function<void(copy_completion)> start;
        std::optional<array_bytes> src, dst;
        if (i != 0) src.emplace(rt, devices[i - 1], bytes, "measure-from");
        if (j != 0) dst.emplace(rt, devices[j - 1], bytes, "measure-to");
        if (i == 0) {
          start = [&](copy_completion c) { dst->start_write(a.data(), std::move(c)); };
          m.path = choose_copy(link_end::host(), link_end::on(devices[j - 1]));
        } else if (j == 0) {
          start = [&](copy_completion c) { src->start_read(b.data(), std::move(c)); };
          m.path = choose_copy(link_end::on(devices[i - 1]), link_end::host());
        } else {
          start = [&](copy_completion c) { start_copy_bytes(*src, *dst, std::move(c)); };
          m.path = choose_copy(link_end::on(devices[i - 1]), link_end::on(devices[j - 1]));
        }
        m.p50_us = time_us(n, [&] { wait(start); });
        m.gb_per_s = static_cast<double>(bytes) / m.p50_us / 1e3;
        out.push_back(m);
      }
  }
  return out;
}

namespace {
std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (std::size_t{1} << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}
char path_letter(copy_path p) { return p == copy_path::shared ? 's' : p == copy_path::device ? 'd' : 't'; }
} // namespace

std::string copy_bandwidth_table(const runtime& rt, const std::vector<copy_measurement>& ms) {
  std::string t;
  char cell[64];
  const std::size_t ends = rt.devices().size() + 1;
  const auto header = [&] {
    t += "  from \\ to ";
    for (std::size_t j = 0; j < ends; ++j) {
      std::snprintf(cell, sizeof cell, "%12s", j == 0 ? "host" : ("device " + std::to_string(j - 1)).c_str());
      t += cell;
    }
    t += "\n";
  };
  std::vector<std::size_t> sizes;
  for (const auto& m : ms)
    if (std::find(sizes.begin(), sizes.end(), m.bytes) == sizes.end()) sizes.push_back(m.bytes);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto bytes = sizes[k];
    const auto first = std::find_if(ms.begin(), ms.end(), [&](const copy_measurement& m) { return m.bytes == bytes; });
    std::snprintf(cell, sizeof cell, "%.2f", first->memcpy_gb_per_s);
    t += "copies of " + size_text(bytes) + ", GB/s (s shared, d device, t staged); host memcpy " + cell + " GB/s\n";
    for (int latency = 0; latency < (k == 0 ? 2 : 1); ++latency) {
      if (latency) t += "copies of " + size_text(bytes) + ", median microseconds per copy\n";
      header();
      for (std::size_t i = 0; i < ends; ++i) {
        std::snprintf(cell, sizeof cell, "  %-10s", i == 0 ? "host" : ("device " + std::to_string(i - 1)).c_str());
        t += cell;
        for (std::size_t j = 0; j < ends; ++j) {
          const auto m = std::find_if(ms.begin(), ms.end(), [&](const copy_measurement& x) {
            return x.bytes == bytes && x.from_index == i && x.to_index == j;
          });
          if (m == ms.end())
            std::snprintf(cell, sizeof cell, "%12s", "-");
          else if (latency)
            std::snprintf(cell, sizeof cell, "%10.1f %c", m->p50_us, path_letter(m->path));
          else
            std::snprintf(cell, sizeof cell, "%10.2f %c", m->gb_per_s, path_letter(m->path));
          t += cell;
        }
        t += "\n";
      }
    }
  }
  return t;
}

} // namespace ringpipe
