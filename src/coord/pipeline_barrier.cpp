// Barriers over a pipeline's stages: built through the pipeline's on_kernels_built hook (the
// pipeline layer does not know barriers), reported through its barrier metrics.

#include <ringpipe/error.hpp>
#include <ringpipe/pipeline_barrier.hpp>

#include <mutex>

namespace ringpipe {

struct pipeline_barrier::slot {
  std::string pipeline, name;
  std::vector<barrier_member> members;
  barrier_options options;
  barrier_builder builder;
  mutable std::mutex mutex;
  std::shared_ptr<barrier> built; // after start()
};

barrier& pipeline_barrier::get() const {
  std::lock_guard lock(slot_->mutex);
  if (!slot_->built)
    throw error(errc::invalid_pipeline,
                "pipeline '" + slot_->pipeline + "': barrier '" + slot_->name + "' exists once the pipeline started");
  return *slot_->built;
}

pipeline_barrier add_barrier(pipeline& p, std::vector<barrier_member> members, barrier_options options,
                             barrier_builder builder) {
  auto s = std::make_shared<pipeline_barrier::slot>();
  s->name = options.name;
  s->pipeline = p.name();
  s->members = std::move(members);
  s->options = std::move(options);
  s->builder = std::move(builder);
  if (s->members.empty())
    throw error(errc::invalid_argument, "barrier '" + s->name + "' needs at least one participant");
  for (const auto& m : s->members)
    if (m.seat_arg) p.keep_resident(m.name);
  p.on_kernels_built([s](const built_kernels& kernels) {
    std::vector<barrier_participant> participants;
    for (const auto& m : s->members) {
      if (s->builder.takes_part && !s->builder.takes_part(m)) continue;
      if (!m.seat_arg) {
        participants.emplace_back(m.name);
        continue;
      }
      try {
        participants.emplace_back(kernels.kernel(m.name), *m.seat_arg, m.name);
      } catch (const error& e) {
        throw error(e.code(), "barrier '" + s->name + "': " + e.what());
      }
    }
    std::shared_ptr<barrier> b;
    try {
      b = s->builder.build ? s->builder.build(std::move(participants), s->options)
                           : std::make_shared<barrier>(std::move(participants), s->options);
    } catch (const error& e) {
      const std::string what = e.what(), label = "barrier '" + s->name + "'";
      throw error(e.code(), what.rfind(label, 0) == 0 ? what : label + ": " + what);
    }
    std::lock_guard lock(s->mutex);
    s->built = std::move(b);
  });
  p.add_barrier_metrics([s] {
    std::lock_guard lock(s->mutex);
    if (s->built) return s->built->stats();
    barrier_stats none;
    none.name = s->name;
    return none;
  });
  return pipeline_barrier(s);
}

} // namespace ringpipe
