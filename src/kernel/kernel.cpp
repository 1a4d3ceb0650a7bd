// The ring_kernel handle: a thin front over its proxy (proxy.hpp).

#include "proxy.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ringpipe {

kernel_spec kernel_spec::from_file(const std::string& path, std::string kernel_name, std::string options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw error(errc::invalid_argument, "kernel '" + kernel_name + "': cannot read its source file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  kernel_spec spec(text.str(), std::move(kernel_name), std::move(options));
  spec.source_name = path;
  const auto dir = std::filesystem::path(path).parent_path();
  spec.include_dirs.push_back(dir.empty() ? std::string(".") : dir.string());
  return spec;
}

std::string_view to_string(kernel_state s) noexcept {
  switch (s) {
  case kernel_state::idle: return "idle";
  case kernel_state::launched: return "launched";
  case kernel_state::running: return "running";
  case kernel_state::parked: return "parked";
  case kernel_state::stopped: return "stopped";
  case kernel_state::faulted: return "faulted";
  }
  return "?";
}

ring_kernel_base::ring_kernel_base(runtime& rt, const device& dev, kernel_spec spec, std::size_t in_bytes,
                                   std::size_t out_bytes, kernel_options options)
    : proxy_(std::make_shared<detail::kernel_proxy>(rt, dev, std::move(spec), in_bytes, out_bytes, options)) {}

ring_kernel_base::~ring_kernel_base() {
  if (!proxy_->started()) return;
  proxy_->request_stop(kernel_stop::now);
  if (proxy_->detached()) return; // given up on: its proxy lives while the launch runs
  // Wait for the launch itself to return (a failure alone does not mean it has). If it does not,
  // its memory stays alive with the proxy, which the pending step keeps: say so rather than block
  // forever.
  if (!proxy_->wait_exited(std::chrono::seconds(10))) {
    std::fprintf(stderr, "ringpipe: %s did not stop; leaving it running\n", proxy_->describe().c_str());
    return;
  }
  if (!proxy_->release_on_strand(std::chrono::seconds(10)))
    std::fprintf(stderr, "ringpipe: kernel '%s': no runtime thread released its device objects within 10 s\n",
                 proxy_->name().c_str());
}

void ring_kernel_base::check_arguments() const { proxy_->check_args_set(); }

bool ring_kernel_base::argument_unset(unsigned index) const { return proxy_->arg_unset(index); }

void ring_kernel_base::set_arg_bytes(unsigned index, const void* value, std::size_t size) {
  if (proxy_->started()) throw error(errc::invalid_argument, "kernel '" + name() + "': set_arg after start()");
  proxy_->set_arg(index, value, size);
}

void ring_kernel_base::keep_alive(std::shared_ptr<const void> owner) { proxy_->keep_alive(std::move(owner)); }

void ring_kernel_base::set_arg_svm(unsigned index, void* pointer) {
  if (proxy_->started()) throw error(errc::invalid_argument, "kernel '" + name() + "': set_arg_svm after start()");
  proxy_->set_arg_svm(index, pointer);
}

void ring_kernel_base::require_resident(std::string_view why) { proxy_->require_resident(why); }
void ring_kernel_base::prefer_parked(bool leave_when_idle) noexcept { proxy_->prefer_parked(leave_when_idle); }
void ring_kernel_base::set_launch_gate(std::shared_ptr<launch_gate> gate) { proxy_->set_launch_gate(std::move(gate)); }
bool ring_kernel_base::started() const noexcept { return proxy_->started(); }

void ring_kernel_base::start_untyped(std::shared_ptr<ring_buffer> in, std::shared_ptr<ring_buffer> out) {
  proxy_->start(std::move(in), std::move(out));
}

const std::string& ring_kernel_base::name() const noexcept { return proxy_->name(); }
const device& ring_kernel_base::on_device() const noexcept { return proxy_->dev(); }
runtime& ring_kernel_base::owner() const noexcept { return proxy_->owner(); }
kernel_mode ring_kernel_base::mode() const noexcept { return proxy_->mode(); }
std::uint32_t ring_kernel_base::local_size() const noexcept { return proxy_->local_size(); }
kernel_state ring_kernel_base::state() const noexcept { return proxy_->state(); }
kernel_stats ring_kernel_base::stats() const noexcept { return proxy_->stats(); }
std::exception_ptr ring_kernel_base::failure() const { return proxy_->failure(); }
void ring_kernel_base::notify() noexcept { proxy_->input_arrived(); }

void ring_kernel_base::on_exit(std::function<void()> fn) {
  on_exit([fn = std::move(fn)](kernel_state, const std::exception_ptr&) { fn(); });
}

void ring_kernel_base::on_exit(std::function<void(kernel_state, std::exception_ptr)> fn) {
  if (proxy_->started()) throw error(errc::invalid_argument, "kernel '" + name() + "': on_exit after start()");
  proxy_->on_exit(std::move(fn));
}

void ring_kernel_base::on_publish(std::function<void()> fn) {
  if (proxy_->started()) throw error(errc::invalid_argument, "kernel '" + name() + "': on_publish after start()");
  proxy_->on_publish(std::move(fn));
}

bool ring_kernel_base::wait_exited(std::chrono::nanoseconds timeout) noexcept {
  return !proxy_->started() || proxy_->wait_exited(timeout);
}

void ring_kernel_base::detach() noexcept {
  if (proxy_->started()) proxy_->detach();
}

void ring_kernel_base::stop_now() noexcept {
  if (proxy_->started()) proxy_->request_stop(kernel_stop::now);
}

void ring_kernel_base::stop(std::chrono::nanoseconds timeout, std::error_code& ec) noexcept {
  ec.clear();
  if (!proxy_->started()) return;
  proxy_->request_stop(kernel_stop::drain);
  if (!proxy_->wait_finished(timeout))
    ec = make_error_code(errc::timeout);
  else if (failure())
    ec = make_error_code(errc::kernel_fault);
}

void ring_kernel_base::stop(std::chrono::nanoseconds timeout) {
  std::error_code ec;
  stop(timeout, ec);
  if (auto f = failure()) std::rethrow_exception(f);
  if (ec) throw error(errc::timeout, proxy_->describe() + " did not stop within " + detail::ms(timeout));
}

void ring_kernel_base::wait(std::chrono::nanoseconds timeout) {
  if (!proxy_->started()) throw error(errc::invalid_argument, "kernel '" + name() + "' was never started");
  const bool ended = proxy_->wait_finished(timeout);
  if (auto f = failure()) std::rethrow_exception(f);
  if (!ended) throw error(errc::timeout, proxy_->describe() + " did not finish within " + detail::ms(timeout));
}

} // namespace ringpipe
