#pragma once
// What host stages do with messages, one type each: a source generates, a transform maps (and
// may drop), a sink consumes, and a mover (inserted by the runtime: staged links, merges into and
// splits out of kernels) copies.

#include "host_stage.hpp"

#include <ringpipe/detail/host_function.hpp>

namespace ringpipe::detail {

class source_stage final : public host_stage {
public:
  using generate_fn = generate_run; // called once per run (see run_progress)
  source_stage(std::shared_ptr<poll_executor> ex, std::string name, std::uint32_t batch, generate_fn generate)
      : host_stage(std::move(ex), std::move(name), batch), generate_(std::move(generate)) {}

private:
  std::size_t turn() override;
  generate_fn generate_;
};

class transform_stage final : public host_stage {
public:
  using transform_fn = transform_run; // may write fewer results than it takes (drops)
  transform_stage(std::shared_ptr<poll_executor> ex, std::string name, std::uint32_t batch, transform_fn transform)
      : host_stage(std::move(ex), std::move(name), batch), transform_(std::move(transform)) {}

private:
  std::size_t turn() override;
  transform_fn transform_;
};

class sink_stage final : public host_stage {
public:
  using consume_fn = consume_run;
  sink_stage(std::shared_ptr<poll_executor> ex, std::string name, std::uint32_t batch, consume_fn consume)
      : host_stage(std::move(ex), std::move(name), batch), consume_(std::move(consume)) {}

private:
  std::size_t turn() override;
  consume_fn consume_;
};

class mover_stage final : public host_stage {
public:
  using host_stage::host_stage;

private:
  std::size_t turn() override;
};

} // namespace ringpipe::detail
