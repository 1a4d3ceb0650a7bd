// The collectives: validation, the choice of path (collective.hpp says which), and the steps of
// each (collective_steps.hpp). Broadcast, gather and scatter are copies alone.
#include "collective_steps.hpp"

#include <cstring>
#include <future>
#include <memory>

namespace ringpipe::detail {

collective_run::collective_run(std::string_view verb, const collective_options& options)
    : what_(std::string(verb) + " '" + options.name + "'"), options_(options),
      deadline_(std::chrono::steady_clock::now() + options.timeout) {
  blocked_.sleeping();
}

void collective_run::before(const device& d, std::string_view step) const {
  if (!options_.before_step) return;
  try {
    options_.before_step(d, step);
  } catch (...) {
    failed(step, d, std::current_exception());
  }
}

void collective_run::late(std::string_view step, const std::string& who) const {
  throw error(errc::timeout, what_ + ": " + std::string(step) + ": " + who + " did not finish its part within " +
                                 std::to_string(options_.timeout.count()) + " ms");
}

void collective_run::failed(std::string_view step, const device& d, const std::exception_ptr& e) const {
  std::error_code code = make_error_code(errc::device_failed);
  std::string why = "unknown failure";
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& s) {
    code = s.code();
    why = s.what();
  } catch (const std::exception& s) {
    why = s.what();
  } catch (...) {
  }
  throw error(code, what_ + ": " + std::string(step) + ": " + d.label() + " failed: " + why);
}

void collective_run::wait_ended(std::string_view step, std::future<cl_int>& ending, const device& d,
                                const std::string& command) const {
  if (ending.wait_until(deadline_) != std::future_status::ready) late(step, d.label() + " (" + command + ")");
  if (const cl_int status = ending.get(); status < 0)
    failed(step, d,
           std::make_exception_ptr(error(std::error_code(status, opencl_category()),
                                         command + " failed with " + opencl_error_name(status))));
}

std::future<cl_int> ending_of(const cl::Event& e) {
  auto* ended = new std::promise<cl_int>;
  auto status = ended->get_future();
  const auto callback = [](cl_event, cl_int s, void* p) {
    std::unique_ptr<std::promise<cl_int>> promise(static_cast<std::promise<cl_int>*>(p));
    promise->set_value(s);
  };
  if (const cl_int err = clSetEventCallback(e(), CL_COMPLETE, callback, ended); err != CL_SUCCESS) {
    delete ended;
    throw_opencl_error(err, "clSetEventCallback (collective)");
  }
  return status;
}

void collective_run::copies(std::string_view step, const std::vector<std::pair<array_bytes, array_bytes>>& pairs) {
  std::vector<std::future<void>> waits(pairs.size());
  std::exception_ptr first;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [from, to] = pairs[i];
    if (from.same_as(to)) continue;
    try {
      before(to.dev(), step);
      auto done = std::make_shared<std::promise<void>>();
      waits[i] = done->get_future();
      start_copy_bytes(from, to, [done](const std::exception_ptr& e) {
        if (e)
          done->set_exception(e);
        else
          done->set_value();
      });
    } catch (...) {
      first = std::current_exception();
      break;
    }
  }
  // Every copy started ends (or runs out of time) before the step reports.
  std::size_t late_one = pairs.size();
  for (std::size_t i = 0; i < waits.size(); ++i) {
    if (!waits[i].valid()) continue;
    if (waits[i].wait_until(deadline_) != std::future_status::ready) {
      late_one = std::min(late_one, i);
      continue;
    }
    try {
      waits[i].get();
    } catch (...) {
      if (!first) first = named(step, pairs[i].second.dev(), std::current_exception());
    }
  }
  if (first) std::rethrow_exception(first);
  if (late_one < pairs.size())
    late(step, pairs[late_one].second.dev().label() + " (copying in from " + pairs[late_one].first.dev().label() + ")");
}

std::exception_ptr collective_run::named(std::string_view step, const device& d, const std::exception_ptr& e) const {
  try {
    failed(step, d, e);
  } catch (...) {
    return std::current_exception();
  }
}

void collective_run::combine(std::string_view step, const std::vector<combine_task>& tasks, const element_op& op) {
  // Only the devices path combines this way: an operation with a host form never gets here.
  std::vector<std::unique_ptr<device_combine>> parts;
  parts.reserve(tasks.size());
  for (const auto& t : tasks)
    parts.push_back(std::make_unique<device_combine>(*this, step, t, op));
  for (;;) {
    std::vector<device_combine*> round;
    for (auto& p : parts)
      if (!p->done()) round.push_back(p.get());
    if (round.empty()) return;
    for (auto* p : round)
      p->fetch();
    for (auto* p : round)
      p->launch();
    for (auto* p : round)
      p->finish();
  }
}

namespace {

std::string sizes_text(const arrays& a) {
  std::string t;
  for (const auto& x : a)
    t += (t.empty() ? "" : ", ") + x.describe() + " (" + std::to_string(x.size_bytes()) + " bytes)";
  return t;
}

void check_arrays(const collective_run& run, const arrays& a, const char* role, std::size_t bytes) {
  if (a.empty()) throw error(errc::invalid_argument, run.what() + ": no " + std::string(role) + " arrays");
  for (const auto& x : a)
    if (x.size_bytes() != bytes)
      throw error(errc::invalid_argument, run.what() + ": " + x.describe() + " holds " +
                                              std::to_string(x.size_bytes()) + " bytes where " + std::to_string(bytes) +
                                              " are needed (" + role + ": " + sizes_text(a) + ")");
}

/// Part d of N of `a`, in whole elements.
array_bytes part(const array_bytes& a, std::size_t d, std::size_t n, std::size_t element) {
  const std::size_t count = a.size_bytes() / element;
  const std::size_t lo = count * d / n, hi = count * (d + 1) / n;
  return a.sub_bytes(lo * element, (hi - lo) * element);
}

/// The path a reducing collective over these arrays takes (see collective.hpp).
enum class reduce_path { host, shared, devices };

reduce_path choose_path(const collective_run& run, const arrays& all, const element_op& op) {
  const bool small = all.front().size_bytes() <= run.options().one_shot_bytes;
  if (!(small && host_reaches(all, op)) && one_shared_context(all)) return reduce_path::shared;
  return op.on_host ? reduce_path::host : reduce_path::devices;
}

arrays joined(arrays a, const arrays& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

void all_reduce_bytes(const arrays& in, const arrays& out, const element_op& op, const collective_options& o) {
  collective_run run("all_reduce", o);
  check_arrays(run, in, "inputs", in.empty() ? 0 : in[0].size_bytes());
  check_arrays(run, out, "outputs", in[0].size_bytes());
  if (in.size() != out.size())
    throw error(errc::invalid_argument, run.what() + ": " + std::to_string(in.size()) + " inputs but " +
                                            std::to_string(out.size()) + " outputs");
  const std::size_t n = in.size();
  switch (choose_path(run, joined(in, out), op)) {
  case reduce_path::host: return host_pass(run, "through the host", in, out, nullptr, op);
  case reduce_path::shared: {
    std::vector<pass_part> parts(n);
    for (std::size_t d = 0; d < n; ++d) {
      parts[d].on = &in[d].dev();
      for (std::size_t p = 0; p < n; ++p) {
        parts[d].inputs.push_back(part(in[(d + p) % n], d, n, op.element));
        parts[d].outputs.push_back(part(out[p], d, n, op.element));
      }
    }
    return shared_pass(run, "one-shot", parts, op);
  }
  case reduce_path::devices: break;
  }
  std::vector<std::pair<array_bytes, array_bytes>> own;
  std::vector<combine_task> tasks;
  for (std::size_t d = 0; d < n; ++d) {
    own.emplace_back(part(in[d], d, n, op.element), part(out[d], d, n, op.element));
    combine_task t{part(out[d], d, n, op.element), {}};
    for (std::size_t r = 1; r < n; ++r) // peers in turn, so no input is read by every device at once
      t.sources.push_back(part(in[(d + r) % n], d, n, op.element));
    tasks.push_back(std::move(t));
  }
  run.copies("reduce-scatter", own);
  run.combine("reduce-scatter", tasks, op);
  std::vector<std::pair<array_bytes, array_bytes>> gather;
  for (std::size_t d = 0; d < n; ++d)
    for (std::size_t r = 1; r < n; ++r) {
      const std::size_t p = (d + r) % n;
      gather.emplace_back(part(out[p], p, n, op.element), part(out[d], p, n, op.element));
    }
  run.copies("all-gather", gather);
}

void reduce_scatter_bytes(const arrays& in, const arrays& out, const element_op& op, const collective_options& o) {
  collective_run run("reduce_scatter", o);
  check_arrays(run, out, "outputs", out.empty() ? 0 : out[0].size_bytes());
  check_arrays(run, in, "inputs (each the size of all outputs)", out[0].size_bytes() * out.size());
  if (in.size() != out.size())
    throw error(errc::invalid_argument, run.what() + ": " + std::to_string(in.size()) + " inputs but " +
                                            std::to_string(out.size()) + " outputs");
  const std::size_t n = in.size();
  const auto inputs_of = [&](std::size_t d) {
    arrays parts;
    for (std::size_t p = 0; p < n; ++p)
      parts.push_back(part(in[(d + p) % n], d, n, op.element));
    return parts;
  };
  switch (choose_path(run, joined(in, out), op)) {
  case reduce_path::host:
    for (std::size_t d = 0; d < n; ++d)
      host_pass(run, "through the host", inputs_of(d), {out[d]}, nullptr, op);
    return;
  case reduce_path::shared: {
    std::vector<pass_part> parts(n);
    for (std::size_t d = 0; d < n; ++d)
      parts[d] = {&in[d].dev(), inputs_of(d), {out[d]}};
    return shared_pass(run, "one-shot", parts, op);
  }
  case reduce_path::devices: break;
  }
  std::vector<std::pair<array_bytes, array_bytes>> own;
  std::vector<combine_task> tasks;
  for (std::size_t d = 0; d < n; ++d) {
    own.emplace_back(part(in[d], d, n, op.element), out[d]);
    combine_task t{out[d], {}};
    for (std::size_t r = 1; r < n; ++r)
      t.sources.push_back(part(in[(d + r) % n], d, n, op.element));
    tasks.push_back(std::move(t));
  }
  run.copies("reduce-scatter", own);
  run.combine("reduce-scatter", tasks, op);
}

void all_gather_bytes(const arrays& in, const arrays& out, const collective_options& o) {
  collective_run run("all_gather", o);
  check_arrays(run, in, "inputs", in.empty() ? 0 : in[0].size_bytes());
  check_arrays(run, out, "outputs (each the size of all inputs)", in[0].size_bytes() * in.size());
  std::vector<std::pair<array_bytes, array_bytes>> pairs;
  for (std::size_t d = 0; d < out.size(); ++d)
    for (std::size_t p = 0; p < in.size(); ++p)
      pairs.emplace_back(in[p], out[d].sub_bytes(p * in[p].size_bytes(), in[p].size_bytes()));
  run.copies("all-gather", pairs);
}

void reduce_bytes(const arrays& in, const array_bytes& root, const element_op& op, const collective_options& o) {
  collective_run run("reduce", o);
  check_arrays(run, in, "inputs", in.empty() ? 0 : in[0].size_bytes());
  check_arrays(run, {root}, "root", in[0].size_bytes());
  const std::size_t n = in.size();
  switch (choose_path(run, joined(in, {root}), op)) {
  case reduce_path::host: return host_pass(run, "through the host", in, {root}, nullptr, op);
  case reduce_path::shared: { // every device reduces a part of the root
    std::vector<pass_part> parts(n);
    for (std::size_t d = 0; d < n; ++d) {
      parts[d].on = &in[d].dev();
      for (std::size_t p = 0; p < n; ++p)
        parts[d].inputs.push_back(part(in[(d + p) % n], d, n, op.element));
      parts[d].outputs.push_back(part(root, d, n, op.element));
    }
    return shared_pass(run, "one-shot", parts, op);
  }
  case reduce_path::devices: break;
  }
  // The root starts as its own input if it is one (so it is never overwritten before it is read).
  std::size_t first = 0;
  for (std::size_t p = 0; p < in.size(); ++p)
    if (in[p].same_as(root)) first = p;
  combine_task t{root, {}};
  for (std::size_t p = 0; p < in.size(); ++p)
    if (p != first) t.sources.push_back(in[p]);
  run.copies("reduce", {{in[first], root}});
  run.combine("reduce", {t}, op);
}

void reduce_to_host_bytes(const arrays& in, void* host, std::size_t bytes, const element_op& op,
                          const collective_options& o) {
  collective_run run("reduce", o);
  check_arrays(run, in, "inputs (each the size of the host memory)", bytes);
  if (op.on_host) return host_pass(run, "through the host", in, {}, host, op);
  // Reduced on the first input's device, then read once.
  const array_bytes root(in[0].owner(), in[0].dev(), bytes, run.what() + " result");
  reduce_bytes(in, root, op, o);
  root.read_bytes(
      host, std::chrono::duration_cast<std::chrono::milliseconds>(run.deadline() - std::chrono::steady_clock::now()) +
                std::chrono::milliseconds(1));
}

void broadcast_bytes(const array_bytes& from, const arrays& to, const collective_options& o) {
  collective_run run("broadcast", o);
  check_arrays(run, to, "outputs", from.size_bytes());
  std::vector<std::pair<array_bytes, array_bytes>> pairs;
  for (const auto& t : to)
    pairs.emplace_back(from, t);
  run.copies("broadcast", pairs);
}

void gather_bytes(const arrays& in, const array_bytes& to, const collective_options& o) {
  collective_run run("gather", o);
  check_arrays(run, in, "inputs", in.empty() ? 0 : in[0].size_bytes());
  check_arrays(run, {to}, "output (the size of all inputs)", in[0].size_bytes() * in.size());
  std::vector<std::pair<array_bytes, array_bytes>> pairs;
  for (std::size_t p = 0; p < in.size(); ++p)
    pairs.emplace_back(in[p], to.sub_bytes(p * in[p].size_bytes(), in[p].size_bytes()));
  run.copies("gather", pairs);
}

void gather_to_host_bytes(const arrays& in, void* host, std::size_t bytes, const collective_options& o) {
  collective_run run("gather", o);
  check_arrays(run, in, "inputs", in.empty() ? 0 : bytes / in.size());
  if (in[0].size_bytes() * in.size() != bytes)
    throw error(errc::invalid_argument, run.what() + ": host memory of " + std::to_string(bytes) + " bytes for " +
                                            std::to_string(in.size()) + " inputs of " +
                                            std::to_string(in[0].size_bytes()) + " bytes");
  for (std::size_t p = 0; p < in.size(); ++p) {
    run.before(in[p].dev(), "gather");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(run.deadline() - std::chrono::steady_clock::now());
    try {
      in[p].read_bytes(static_cast<std::byte*>(host) + p * in[p].size_bytes(),
                       std::max(left, std::chrono::milliseconds(1)));
    } catch (...) {
      run.failed("gather", in[p].dev(), std::current_exception());
    }
  }
}

void scatter_bytes(const array_bytes& from, const arrays& to, const collective_options& o) {
  collective_run run("scatter", o);
  check_arrays(run, to, "outputs", to.empty() ? 0 : from.size_bytes() / to.size());
  check_arrays(run, {from}, "input (the size of all outputs)", to[0].size_bytes() * to.size());
  std::vector<std::pair<array_bytes, array_bytes>> pairs;
  for (std::size_t d = 0; d < to.size(); ++d)
    pairs.emplace_back(from.sub_bytes(d * to[d].size_bytes(), to[d].size_bytes()), to[d]);
  run.copies("scatter", pairs);
}

} // namespace ringpipe::detail
