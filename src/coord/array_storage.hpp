#pragma once
// The memory behind a device array, shared by every view of it and by every copy in flight, so
// an array freed while a copy runs lives until the copy ends.

#include <ringpipe/array.hpp>

#include <string>

namespace ringpipe::detail {

struct array_storage {
  array_storage(runtime& rt, const device& dev, std::size_t bytes, std::string name, std::optional<array_memory> asked);
  ~array_storage();
  array_storage(const array_storage&) = delete;
  array_storage& operator=(const array_storage&) = delete;

  runtime& rt;
  device dev;
  std::string name;
  std::size_t bytes;
  array_memory memory;
  void* svm = nullptr; ///< shared memory
  cl::Buffer buffer;   ///< buffer memory
};

/// One end of a copy: host memory, or a view of an array.
struct copy_end {
  const device* dev = nullptr;         ///< null: the host
  std::shared_ptr<array_storage> keep; ///< the array, alive while the copy runs
  std::byte* host = nullptr;           ///< where the host reaches the bytes (host memory, shared memory)
  cl_mem buffer = nullptr;             ///< buffer memory
  std::size_t offset = 0;              ///< into `buffer`
  std::string what;                    ///< "host memory" or the array's describe()
};

/// A host-memory end that a blocking call may abandon on a timeout: the copy touches the memory
/// only under `mutex` and never once `abandoned` is set.
struct host_guard {
  std::mutex mutex;
  bool abandoned = false;
};

/// Starts moving `bytes` from `from` to `to` on `path`; `done` runs once, when it has ended.
/// With a guard, host memory ends are copied by the host, chunk by chunk, under the guard.
void start_transfer(runtime& rt, copy_end from, copy_end to, std::size_t bytes, copy_path path,
                    std::shared_ptr<host_guard> guard, copy_completion done);

} // namespace ringpipe::detail
