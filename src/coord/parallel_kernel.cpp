// parallel_kernel: the kernel built for every device of its runs (build errors before anything
// runs), arguments checked against it, and the report.
#include "device_list.hpp"
#include "parallel_run.hpp"

#include <ringpipe/cpu_cores.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/split_array.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace ringpipe {
namespace {

using kind = detail::parallel_arg::kind;

std::string kind_name(kind k) {
  switch (k) {
  case kind::value: return "value";
  case kind::per_device: return "per_device";
  case kind::chunk_input: return "input";
  case kind::whole_input: return "whole_input";
  case kind::output: return "output";
  case kind::split: return "split array";
  case kind::piece_origin: return "piece_origin";
  case kind::piece_grain: return "piece_grain";
  case kind::piece_stride: return "piece_stride";
  }
  return "?";
}

} // namespace

parallel_kernel::parallel_kernel(runtime& rt, kernel_source source, parallel_for_options options)
    : source_(std::move(source)), options_(std::move(options)), speeds_(std::make_unique<detail::parallel_speeds>()) {
  const std::string what = "parallel_for '" + options_.name + "'";
  speeds_->commands = rt.transfer_service();
  speeds_->lanes = detail::devices_named(rt, options_.devices, what);
  options_.devices.clear();
  for (const device* d : speeds_->lanes)
    options_.devices.push_back(d->index());
  if (options_.timeout.count() <= 0) throw error(errc::invalid_argument, what + ": the timeout must be > 0");
  if (options_.cpu_devices_share_cores) {
    speeds_->cpu_cores =
        *options_.cpu_devices_share_cores ? "told they share the host's cores" : "told they have cores of their own";
  } else {
    const auto use = cpu_devices_core_use(speeds_->lanes, rt.host_cores());
    options_.cpu_devices_share_cores = use.shared();
    speeds_->cpu_cores = use.describe();
  }
  if (!std::holds_alternative<dynamic_partition>(options_.partition))
    (void)split(options_.partition, 0, speeds_->lanes.size()); // a bad partition is refused here, naming it
  const std::string file = source_.file.empty() ? "kernel " + source_.kernel : source_.file;
  const std::string text = resolve_includes(source_.source, file);
  for (const device* d : speeds_->lanes) {
    std::string build = base_build_options(*d);
    if (!source_.build_options.empty()) build += " " + source_.build_options;
    auto program = d->programs().get(*d, text, build, what + " kernel '" + source_.kernel + "'");
    cl_kernel probe = clCreateKernel(program(), source_.kernel.c_str(), nullptr);
    if (probe == nullptr) {
      std::string why = what;
      why.append(": ").append(file).append(" has no kernel named '").append(source_.kernel);
      why.append("' (for ").append(d->label()).append(")");
      throw error(errc::invalid_argument, why);
    }
    clReleaseKernel(probe);
    speeds_->programs.push_back(std::move(program));
  }
}

parallel_kernel::~parallel_kernel() = default;

parallel_for_report parallel_kernel::run_erased(std::size_t n, std::vector<detail::parallel_arg> args) {
  const std::string what = "parallel_for '" + options_.name + "' (kernel '" + source_.kernel + "')";
  cl_uint takes = 0;
  cl::Kernel k(speeds_->programs.front(), source_.kernel.c_str());
  clGetKernelInfo(k(), CL_KERNEL_NUM_ARGS, sizeof takes, &takes, nullptr);
  if (takes != args.size())
    throw error(errc::invalid_argument, what + " takes " + std::to_string(takes) + " arguments; run() was given " +
                                            std::to_string(args.size()));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    const std::string arg = what + ": argument " + std::to_string(i) + " (" + kind_name(a.how) + ")";
    if ((a.how == kind::chunk_input || a.how == kind::output) && a.count != n)
      throw error(errc::invalid_argument,
                  arg + " holds " + std::to_string(a.count) + " elements; the range has " + std::to_string(n));
    if (a.how == kind::per_device && a.count != speeds_->lanes.size())
      throw error(errc::invalid_argument, arg + " holds " + std::to_string(a.count) + " values for " +
                                              std::to_string(speeds_->lanes.size()) + " devices");
  }
  check_split_arguments(what, n, args);
  std::lock_guard one(speeds_->one_run_at_a_time);
  if (n == 0) {
    parallel_for_report r;
    r.name = options_.name;
    r.partition = describe(options_.partition);
    for (const device* d : speeds_->lanes)
      r.devices.push_back({d->label(), 0, 0, 0, 0, {}, {}});
    r.cpu_cores = speeds_->cpu_cores;
    return r;
  }
  auto r = detail::run_parallel(*speeds_, options_, source_, n, args);
  r.cpu_cores = speeds_->cpu_cores;
  return r;
}

void parallel_kernel::check_split_arguments(const std::string& what, std::size_t n,
                                            const std::vector<detail::parallel_arg>& args) const {
  const split_bytes* first = nullptr;
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].how == kind::split) {
      const split_bytes& a = *args[i].split;
      if (first == nullptr) first = &a;
      if (!a.layout().same_as(first->layout()))
        throw error(errc::invalid_argument, what + ": " + a.describe() + " is not laid out like " + first->describe() +
                                                " (make one from the other's layout())");
      if (a.layout().size() != n)
        throw error(errc::invalid_argument, what + ": " + a.describe() + " holds " + std::to_string(a.layout().size()) +
                                                " elements; the range has " + std::to_string(n));
    }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string arg = what + ": argument " + std::to_string(i) + " (" + kind_name(args[i].how) + ")";
    const bool host_array =
        args[i].how == kind::chunk_input || args[i].how == kind::whole_input || args[i].how == kind::output;
    if (first != nullptr && host_array)
      throw error(errc::invalid_argument, arg + ": a run over split arrays takes split arrays and values, not host "
                                                "arrays (write host data into a split array laid out alike)");
    const bool about_pieces =
        args[i].how == kind::piece_origin || args[i].how == kind::piece_grain || args[i].how == kind::piece_stride;
    if (first == nullptr && about_pieces)
      throw error(errc::invalid_argument, arg + ": only runs over split arrays have pieces");
  }
  if (first == nullptr) return;
  for (const split_piece& p : first->layout().pieces())
    if (std::none_of(speeds_->lanes.begin(), speeds_->lanes.end(), [&](const device* d) { return d == p.dev; }))
      throw error(errc::invalid_argument, what + ": " + first->describe() + " has a piece on " + p.dev->label() +
                                              ", a device this parallel_for was not built for (its options' devices)");
}

weighted_partition by_measured_speed(const parallel_for_report& report) {
  std::map<std::string, std::size_t> fastest; // per pool, the device with the highest speed
  for (std::size_t d = 0; d < report.devices.size(); ++d) {
    const auto& x = report.devices[d];
    if (!x.failure.empty() || !(x.items_per_second > 0)) continue;
    const auto [at, first] = fastest.emplace(x.pool, d);
    if (!first && report.devices[at->second].items_per_second < x.items_per_second) at->second = d;
  }
  if (fastest.empty())
    throw error(errc::invalid_argument,
                "parallel_for '" + report.name + "': no device has a measured speed to weigh by");
  double top = 0;
  for (const auto& [pool, d] : fastest)
    top = std::max(top, report.devices[d].items_per_second);
  weighted_partition w{std::vector<double>(report.devices.size(), 0.0)};
  for (const auto& [pool, d] : fastest) // relative to the fastest, three digits: "weighted (1, 0.25)"
    w.weights[d] = std::max(0.001, std::round(report.devices[d].items_per_second / top * 1000) / 1000);
  return w;
}

double parallel_for_report::share(std::size_t device) const noexcept {
  if (device >= devices.size() || items == 0) return 0;
  return static_cast<double>(devices[device].items) / static_cast<double>(items);
}

std::string parallel_for_report::table() const {
  std::ostringstream s;
  char line[320];
  std::snprintf(line, sizeof line, "%s: %zu indices, %s partition, %.3f ms\n", name.c_str(), items, partition.c_str(),
                seconds * 1e3);
  s << line;
  if (!cpu_cores.empty()) s << "  CPU devices: " << cpu_cores << "\n";
  std::snprintf(line, sizeof line, "  %-44s %10s %7s %7s %10s %14s\n", "device", "items", "share", "chunks", "busy ms",
                "items/s");
  s << line;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const auto& x = devices[d];
    std::snprintf(line, sizeof line, "  %-44.44s %10zu %6.1f%% %7zu %10.3f %14.4g\n", x.device.c_str(), x.items,
                  100 * share(d), x.chunks, x.busy_seconds * 1e3, x.items_per_second);
    s << line;
    if (!x.failure.empty()) s << "    failed: " << x.failure << "\n";
  }
  return s.str();
}

} // namespace ringpipe
