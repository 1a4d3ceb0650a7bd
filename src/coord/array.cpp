#include "array_storage.hpp"

#include <ringpipe/detail/blocked_wait.hpp>
#include <ringpipe/kernel.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>

namespace ringpipe {

std::string_view to_string(array_memory m) noexcept { return m == array_memory::shared ? "shared" : "buffer"; }

namespace detail {

array_storage::array_storage(runtime& owner, const device& d, std::size_t size, std::string array_name,
                             std::optional<array_memory> asked)
    : rt(owner), dev(d), name(std::move(array_name)), bytes(size),
      memory(asked.value_or(reaches_shared_memory(d) ? array_memory::shared : array_memory::buffer)) {
  const auto& info = dev.info();
  if (memory == array_memory::shared && !reaches_shared_memory(dev))
    throw error(errc::invalid_argument, "array '" + name + "': shared memory asked for on " + dev.label() +
                                            ", which has no fine-grained SVM with atomics (leave the memory "
                                            "unset to get a buffer)");
  const auto refuse = [&](const char* limit, std::uint64_t value) {
    throw error(errc::out_of_memory, "array '" + name + "' of " + std::to_string(bytes) + " bytes on " + dev.label() +
                                         ": larger than the device's " + limit + " (" + std::to_string(value) +
                                         " bytes)");
  };
  if (info.max_alloc != 0 && bytes > info.max_alloc) refuse("largest allocation", info.max_alloc);
  if (info.global_memory != 0 && bytes > info.global_memory) refuse("memory", info.global_memory);
  if (bytes == 0) return;
  if (memory == array_memory::shared) {
    svm = clSVMAlloc(dev.context()(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, bytes, 64);
    if (svm == nullptr)
      throw error(errc::out_of_memory,
                  "array '" + name + "': clSVMAlloc of " + std::to_string(bytes) + " bytes failed on " + dev.label());
  } else {
    buffer = cl_call(("clCreateBuffer for array '" + name + "' on " + dev.label()).c_str(),
                     [&] { return cl::Buffer(dev.context(), CL_MEM_READ_WRITE, bytes); });
  }
}

array_storage::~array_storage() {
  if (svm != nullptr) clSVMFree(dev.context()(), svm);
}

namespace {

/// Waits for one copy started with a guard; on a timeout abandons the host memory and throws.
void run_blocking(runtime& rt, copy_end from, copy_end to, std::size_t bytes, copy_path path,
                  std::chrono::milliseconds timeout, const std::string& what) {
  struct waiter {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr failure;
  };
  auto w = std::make_shared<waiter>();
  auto guard = std::make_shared<host_guard>();
  start_transfer(rt, std::move(from), std::move(to), bytes, path, guard, [w](std::exception_ptr e) {
    const std::lock_guard lock(w->mutex);
    w->done = true;
    w->failure = std::move(e);
    w->cv.notify_all();
  });
  detail::blocked_wait blocked;
  std::unique_lock lock(w->mutex);
  if (!w->done) { // on one of the runtime's io threads, the copy's steps posted to it run on a stand-in
    lock.unlock();
    blocked.sleeping();
    lock.lock();
  }
  if (!w->cv.wait_for(lock, timeout, [&] { return w->done; })) {
    const std::lock_guard abandon(guard->mutex);
    guard->abandoned = true;
    throw error(errc::timeout, what + " did not finish within " + std::to_string(timeout.count()) +
                                   " ms (the device may be busy: a resident kernel holds its workers)");
  }
  if (w->failure) std::rethrow_exception(w->failure);
}

copy_end host_end(const void* host) {
  copy_end e;
  e.host = static_cast<std::byte*>(const_cast<void*>(host));
  e.what = "host memory";
  return e;
}

} // namespace
} // namespace detail

array_bytes::array_bytes(runtime& rt, const device& dev, std::size_t bytes, std::string name,
                         std::optional<array_memory> memory)
    : storage_(std::make_shared<detail::array_storage>(rt, dev, bytes, std::move(name), memory)), bytes_(bytes) {}

namespace {
const detail::array_storage& storage_of(const std::shared_ptr<detail::array_storage>& s) {
  if (!s) throw error(errc::invalid_argument, "device array: used before it was allocated (default-constructed)");
  return *s;
}
} // namespace

const device& array_bytes::dev() const { return storage_of(storage_).dev; }
const std::string& array_bytes::name() const { return storage_of(storage_).name; }
runtime& array_bytes::owner() const { return storage_of(storage_).rt; }
array_memory array_bytes::memory() const { return storage_of(storage_).memory; }
const cl::Buffer& array_bytes::buffer() const { return storage_of(storage_).buffer; }

void* array_bytes::data() const noexcept {
  if (!storage_ || storage_->svm == nullptr) return nullptr;
  return static_cast<std::byte*>(storage_->svm) + offset_;
}

std::string array_bytes::describe() const {
  const auto& s = storage_of(storage_);
  const bool whole = offset_ == 0 && bytes_ == s.bytes;
  return "array '" + s.name + "'" +
         (whole ? "" : " [" + std::to_string(offset_) + ", " + std::to_string(offset_ + bytes_) + ")") + " on " +
         s.dev.label();
}

array_bytes array_bytes::sub_bytes(std::size_t offset, std::size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw error(errc::invalid_argument, describe() + ": sub-range of " + std::to_string(bytes) + " bytes at " +
                                            std::to_string(offset) + " ends past its " + std::to_string(bytes_) +
                                            " bytes");
  array_bytes view = *this;
  view.offset_ += offset;
  view.bytes_ = bytes;
  return view;
}

void array_bytes::check_same_size(std::size_t bytes, const char* what) const {
  if (bytes != bytes_)
    throw error(errc::invalid_argument, describe() + ": " + what + " of " + std::to_string(bytes) +
                                            " bytes into an array of " + std::to_string(bytes_) + " bytes");
}

namespace {

detail::copy_end array_end(const std::shared_ptr<detail::array_storage>& storage, std::size_t offset,
                           std::string what) {
  detail::copy_end e;
  e.dev = &storage->dev;
  e.keep = storage;
  e.offset = offset;
  e.what = std::move(what);
  if (storage->svm != nullptr)
    e.host = static_cast<std::byte*>(storage->svm) + offset;
  else
    e.buffer = storage->buffer();
  return e;
}

/// choose_copy() for the two ends, except that an array kept in a buffer (asked for on a device
/// that has shared memory) is reached by the OpenCL implementation, never by a memcpy.
copy_path path_between(const detail::array_storage* from, const detail::array_storage* to) {
  const auto end = [](const detail::array_storage* s) {
    return s == nullptr ? link_end::host() : link_end::on(s->dev);
  };
  const copy_path path = choose_copy(end(from), end(to));
  const auto buffer = [](const detail::array_storage* s) { return s != nullptr && s->memory == array_memory::buffer; };
  const bool buffers = buffer(from) || buffer(to);
  return path == copy_path::shared && buffers ? copy_path::device : path;
}

} // namespace

void array_bytes::start_write(const void* host, copy_completion done) const {
  const auto& s = storage_of(storage_);
  detail::start_transfer(s.rt, detail::host_end(host), array_end(storage_, offset_, describe()), bytes_,
                         path_between(nullptr, &s), nullptr, std::move(done));
}

void array_bytes::start_read(void* host, copy_completion done) const {
  const auto& s = storage_of(storage_);
  detail::start_transfer(s.rt, array_end(storage_, offset_, describe()), detail::host_end(host), bytes_,
                         path_between(&s, nullptr), nullptr, std::move(done));
}

void array_bytes::write_bytes(const void* host, std::chrono::milliseconds timeout) const {
  const auto& s = storage_of(storage_);
  detail::run_blocking(s.rt, detail::host_end(host), array_end(storage_, offset_, describe()), bytes_,
                       path_between(nullptr, &s), timeout,
                       "write of " + std::to_string(bytes_) + " bytes into " + describe());
}

void array_bytes::read_bytes(void* host, std::chrono::milliseconds timeout) const {
  const auto& s = storage_of(storage_);
  detail::run_blocking(s.rt, array_end(storage_, offset_, describe()), detail::host_end(host), bytes_,
                       path_between(&s, nullptr), timeout,
                       "read of " + std::to_string(bytes_) + " bytes from " + describe());
}

namespace {
copy_path checked_peer_path(const array_bytes& from, const array_bytes& to, const detail::array_storage* from_storage,
                            const detail::array_storage* to_storage) {
  if (from.size_bytes() != to.size_bytes())
    throw error(errc::invalid_argument, "copy from " + from.describe() + " (" + std::to_string(from.size_bytes()) +
                                            " bytes) to " + to.describe() + " (" + std::to_string(to.size_bytes()) +
                                            " bytes): the sizes differ");
  if (&from.owner() != &to.owner())
    throw error(errc::invalid_argument,
                "copy from " + from.describe() + " to " + to.describe() + ": the arrays belong to different runtimes");
  return path_between(from_storage, to_storage);
}
} // namespace

void start_copy_bytes(const array_bytes& from, const array_bytes& to, copy_completion done) {
  const copy_path path = checked_peer_path(from, to, from.storage_.get(), to.storage_.get());
  detail::start_transfer(from.owner(), array_end(from.storage_, from.offset_, from.describe()),
                         array_end(to.storage_, to.offset_, to.describe()), from.bytes_, path, nullptr,
                         std::move(done));
}

void copy_bytes(const array_bytes& from, const array_bytes& to, std::chrono::milliseconds timeout) {
  const copy_path path = checked_peer_path(from, to, from.storage_.get(), to.storage_.get());
  detail::run_blocking(from.owner(), array_end(from.storage_, from.offset_, from.describe()),
                       array_end(to.storage_, to.offset_, to.describe()), from.bytes_, path, timeout,
                       "copy of " + std::to_string(from.bytes_) + " bytes from " + from.describe() + " to " +
                           to.describe());
}

void array_bytes::bind_kernel_arg(ring_kernel_base& kernel, unsigned index) const {
  const auto& s = storage_of(storage_);
  if (s.memory == array_memory::shared) {
    kernel.set_arg_svm(index, data());
  } else {
    if (offset_ != 0 || bytes_ != s.bytes)
      throw error(errc::invalid_argument, describe() + ": a sub-range of a buffer array cannot be a kernel "
                                                       "argument (pass the whole array and an offset)");
    const cl_mem mem = s.buffer();
    kernel.set_arg(index, mem);
  }
  kernel.keep_alive(storage_);
}

} // namespace ringpipe
