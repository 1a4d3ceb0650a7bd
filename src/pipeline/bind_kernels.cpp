// After the kernels are built and before any launches: the layers above bind what they need
// (a barrier's seats), then every kernel's own arguments are checked.

#include "runner.hpp"

namespace ringpipe::detail {

namespace {

class runner_kernels final : public built_kernels {
public:
  runner_kernels(const graph& g, const plan& p, std::vector<stage_run>& stages) : g_(g), plan_(p), stages_(stages) {}

  ring_kernel_base& kernel(const std::string& stage) const override {
    const std::string where = "stage '" + stage + "'";
    for (std::size_t i = 0; i < g_.stages.size(); ++i) {
      if (g_.stages[i].name != stage) continue;
      if (!g_.stages[i].is_kernel())
        throw error(errc::invalid_pipeline, where + " is not a ring kernel (it is a " +
                                                std::string(to_string(g_.stages[i].kind)) +
                                                " stage; host code takes part by a name of its own)");
      if (const auto into = plan_.stages[i].fused_into)
        throw error(errc::invalid_pipeline,
                    where + " runs fused into '" + g_.stages[*into].name + "': it has no kernel of its own");
      return *stages_[i].kernel;
    }
    std::string kernels;
    for (const auto& s : g_.stages)
      if (s.is_kernel()) kernels += (kernels.empty() ? "'" : ", '") + s.name + "'";
    throw error(errc::invalid_pipeline,
                where + " does not exist (its kernel stages: " + (kernels.empty() ? "none" : kernels) + ")");
  }

private:
  const graph& g_;
  const plan& plan_;
  std::vector<stage_run>& stages_;
};

} // namespace

void runner::bind_kernels() {
  const runner_kernels kernels(g_, plan_, stages_);
  for (const auto& fn : g_.on_kernels_built) {
    try {
      fn(kernels);
    } catch (const ringpipe::error& e) {
      std::string what = "pipeline '" + g_.name + "'";
      const std::string said = e.what();
      if (said.rfind(what, 0) == 0) throw;
      what += ": ";
      what += said;
      throw error(e.code(), what);
    }
  }
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    if (!stages_[i].kernel) continue;
    try {
      stages_[i].kernel->check_arguments(); // from the spec, and what the layers above bound
    } catch (const ringpipe::error& e) {
      throw error(e.code(), "pipeline '" + g_.name + "': stage '" + g_.stages[i].name + "': " + e.what());
    }
  }
}

} // namespace ringpipe::detail
