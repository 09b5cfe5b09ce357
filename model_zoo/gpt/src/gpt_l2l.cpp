// A GPT under L2L; see axonn/gpt/gpt_l2l.hpp.
#include "axonn/gpt/gpt_l2l.hpp"

#include "axonn/runtime/sharding.hpp"
#include "axonn/schedule/l2l.hpp"

namespace axonn::gpt {

GptL2L::GptL2L(const plan::Plan& plan, runtime::ProcessGrid& grid, const GptConfig& cfg, const InitialWeights& weights,
               runtime::TrainerOptions options)
    : trainer(grid, plan, options), grid_(grid), cfg_(cfg) {
  for (int64_t u = 0; u < plan.model.num_units; ++u) {
    engines.push_back(std::make_unique<runtime::StageEngine>(grid, schedule::l2l_unit_schedule(plan, u), nullptr));
    models.push_back(std::make_unique<ParallelGpt>(cfg, grid, weights, engines.back()->schedule(), engines.back()->engine()));
    trainer.add_unit({models.back().get(), engines.back().get()});
  }
}

NamedTensors GptL2L::master_weights() const {
  NamedTensors out;
  const auto layout = parameter_layout(cfg_, grid_.grid().layout);
  for (const auto& [name, shard] : trainer.master_weights())
    for (const auto& l : layout)
      if (l.name == name) out.emplace_back(name, runtime::unshard(grid_, shard.contiguous(), l.spec, l.shape));
  return out;
}

}  // namespace axonn::gpt
