// The schedule of one pipeline stage of a plan, as data: which layers the stage holds,
// their roles in a pass (pass.hpp), the three pass programs (forward, backward, the
// step's last backward) and the step program (step.hpp). build_schedule() is what the
// runtime executes; the planner builds the same pieces from the same functions for
// each candidate without a plan (stage_layouts, pass_layers, step_program).
//
// Stages hold contiguous pipeline units (a GPT's blocks; the embedding joins the first,
// the LM head the last): stage s holds plan.stage_units()[s] of them.
//
// Example:
//   StageSchedule s = build_schedule(plan, /*stage=*/1);
//   s.layer_names[s.layers.size() - 1];   // "lm_head" on the last stage
//   s.steps;                              // empty under message-driven with Ginter > 1
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/schedule/pass.hpp"
#include "axonn/schedule/step.hpp"

namespace axonn::schedule {

// The layers of one stage: [first_layer, last_layer) of model.layers, units
// [first_unit, first_unit + units).
struct StageLayout {
  int64_t stage = 0;
  int64_t first_unit = 0, units = 0;
  size_t first_layer = 0, last_layer = 0;
};
// One per stage; `stage_units` sums to m.num_units.
std::vector<StageLayout> stage_layouts(const model::ModelDescription& m, const std::vector<int64_t>& stage_units);

// AxoNN's checkpoint-interval rule (seed-spec A5, eq. 1): the factor of
// `blocks_per_stage` closest to sqrt(total_blocks) (the smaller one on a tie).
// 48 blocks on 6 stages: 8; on 24 stages: 2.
int64_t axonn_checkpoint_interval(int64_t blocks_per_stage, int64_t total_blocks);

// How a layer takes part in passes, without its bytes and cache flag (pass_layers
// sets those): weighted, dI, weight in backward, recomputed (with checkpointing), and
// its segment: layers of `interval` consecutive units recomputed together, counted
// from the stage's first unit; the collectives of the grid's tensor layout (2d: the input
// gathered first, no collective after the compute; 3d: the input gathered first, the
// output reduce-scattered after, the output gradient gathered before the backward).
PassLayer pass_layer(const model::Layer& l, bool checkpointing, int64_t interval, int64_t first_unit,
                     topo::TensorLayout layout = topo::TensorLayout::Axonn3d);

// Optimization 4 as the runtime applies it: the first `cache_layers` weighted,
// recomputed layers of the stage keep their gathered block for the recompute.
void mark_cached(PassLayer* layers, size_t count, int64_t cache_layers);

// A layer's data-parallel gradient shard on one rank, bytes: grad_reduce_bytes *
// k*n / (Gx*Gy*Gz) (0 without weights). The bucket sizes of planner and runtime.
double gradient_shard_bytes(const model::Layer& l, const topo::Grid& g, int64_t grad_reduce_bytes);

// The pass layers of a stage of a plan: flags, cache, and each weighted layer's
// data-parallel gradient shard.
std::vector<PassLayer> pass_layers(const plan::Plan& p, const StageLayout& s);

// Micro-batches whose activations a stage holds at once: gpipe M; 1f1b
// min(M, stages - stage); message-driven min(M, limit), 1 on the last stage (each
// backward right after its forward); one stage: 1.
int64_t inflight_microbatches(plan::PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t microbatches,
                              int64_t limit);

struct StageSchedule {
  StageLayout layout;
  int64_t stages = 1, microbatches = 1, limit = 1;
  int64_t checkpoint_interval = 1;  // units (blocks) per checkpointed segment
  plan::PipelineSchedule pipeline = plan::PipelineSchedule::MessageDriven;
  PassSettings settings;
  // The optimizer phase (OptimizerStep): with offload it also owns the data-parallel
  // reduction, so the backward passes list no data-parallel buckets.
  plan::OptimizerSettings optimizer;
  plan::Precision precision;             // the element types the stage computes and reduces in
  std::vector<PassLayer> layers;         // the stage's layers
  std::vector<std::string> layer_names;  // their names in the model description
  std::vector<LayerInstruction> forward, backward, last_backward;
  std::vector<StepInstruction> steps;    // empty for message-driven with more than one stage

  bool first_stage() const { return layout.stage == 0; }
  bool last_stage() const { return layout.stage == stages - 1; }
  // The stage's index of a layer by its model-description name; -1 if it has none.
  int64_t layer_index(const std::string& name) const;
};

// `pipeline` overrides the plan's schedule (axrun --pipeline-schedule).
StageSchedule build_schedule(const plan::Plan& p, int64_t stage);
StageSchedule build_schedule(const plan::Plan& p, int64_t stage, plan::PipelineSchedule pipeline);

}  // namespace axonn::schedule
