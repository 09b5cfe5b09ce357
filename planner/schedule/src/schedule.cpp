// The schedule IR; see axonn/schedule/{pass,step,schedule}.hpp.
#include "axonn/schedule/schedule.hpp"

#include <algorithm>
#include <cmath>

#include "axonn/common/error.hpp"
#include "axonn/plan/layout_rules.hpp"

namespace axonn::schedule {

// ---- pass.hpp ----------------------------------------------------------------------

const char* layer_op_name(LayerOp op) {
  switch (op) {
    case LayerOp::Prefetch: return "Prefetch";
    case LayerOp::Fetch: return "Fetch";
    case LayerOp::Forward: return "Forward";
    case LayerOp::ForwardCollective: return "ForwardCollective";
    case LayerOp::BackwardInput: return "BackwardInput";
    case LayerOp::InputGradCollective: return "InputGradCollective";
    case LayerOp::InputGradWait: return "InputGradWait";
    case LayerOp::BackwardWeight: return "BackwardWeight";
    case LayerOp::ReduceScatter: return "ReduceScatter";
    case LayerOp::ReducedGradient: return "ReducedGradient";
    case LayerOp::BucketAllReduce: return "BucketAllReduce";
    case LayerOp::WaitReduceScatters: return "WaitReduceScatters";
    case LayerOp::InputGather: return "InputGather";
    case LayerOp::OutputGradGather: return "OutputGradGather";
  }
  return "?";
}

std::string LayerInstruction::to_string() const {
  std::string s = std::string(layer_op_name(op)) + "(" + std::to_string(layer);
  if (source == Source::Gather) s += ", gather";
  if (source == Source::Prefetched) s += ", prefetched";
  if (source == Source::Cached) s += ", cached";
  if (keep) s += ", keep";
  if (op == LayerOp::BucketAllReduce) s += ", " + std::to_string(count) + " layers";
  return s + ")";
}

std::vector<LayerInstruction> pass_program(const PassLayer* layers, size_t count, const PassSettings& s,
                                           PassKind kind) {
  std::vector<LayerInstruction> out;
  emit_pass(layers, count, s, kind, [&](const LayerInstruction& i) { out.push_back(i); });
  return out;
}

// ---- step.hpp ----------------------------------------------------------------------

const char* step_op_name(StepOp op) {
  switch (op) {
    case StepOp::RecvActivation: return "RecvActivation";
    case StepOp::Forward: return "Forward";
    case StepOp::SendActivation: return "SendActivation";
    case StepOp::RecvGradient: return "RecvGradient";
    case StepOp::Backward: return "Backward";
    case StepOp::SendGradient: return "SendGradient";
    case StepOp::ReduceGradients: return "ReduceGradients";
    case StepOp::OptimizerStep: return "OptimizerStep";
  }
  return "?";
}

std::string StepInstruction::to_string() const {
  return std::string(step_op_name(op)) + (microbatch >= 0 ? "(" + std::to_string(microbatch) + ")" : "");
}

namespace {

void forward(std::vector<StepInstruction>& out, int64_t stage, int64_t stages, int64_t mb) {
  const auto m = static_cast<int32_t>(mb);
  if (stage > 0) out.push_back({StepOp::RecvActivation, m});
  out.push_back({StepOp::Forward, m});
  if (stage < stages - 1) out.push_back({StepOp::SendActivation, m});
}

void backward(std::vector<StepInstruction>& out, int64_t stage, int64_t stages, int64_t mb) {
  const auto m = static_cast<int32_t>(mb);
  if (stage < stages - 1) out.push_back({StepOp::RecvGradient, m});
  out.push_back({StepOp::Backward, m});
  if (stage > 0) out.push_back({StepOp::SendGradient, m});
}

}  // namespace

std::vector<StepInstruction> step_program(plan::PipelineSchedule schedule, int64_t stage, int64_t stages,
                                          int64_t microbatches) {
  std::vector<StepInstruction> out;
  step_program(schedule, stage, stages, microbatches, out);
  return out;
}

void step_program(plan::PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t microbatches,
                  std::vector<StepInstruction>& out) {
  AXONN_ASSERT(stage >= 0 && stage < stages && microbatches >= 1);
  out.clear();
  if (stages == 1) {
    for (int64_t mb = 0; mb < microbatches; ++mb) forward(out, 0, 1, mb), backward(out, 0, 1, mb);
  } else if (schedule == plan::PipelineSchedule::GPipe) {
    for (int64_t mb = 0; mb < microbatches; ++mb) forward(out, stage, stages, mb);
    for (int64_t mb = 0; mb < microbatches; ++mb) backward(out, stage, stages, mb);
  } else if (schedule == plan::PipelineSchedule::OneFOneB) {
    const int64_t warmup = std::min(stages - stage - 1, microbatches);
    int64_t f = 0, b = 0;
    for (; f < warmup; ++f) forward(out, stage, stages, f);
    for (; f < microbatches; ++f, ++b) forward(out, stage, stages, f), backward(out, stage, stages, b);
    for (; b < microbatches; ++b) backward(out, stage, stages, b);
  } else {
    throw InternalError("schedule", "the message-driven schedule has no fixed order", "step_program",
                        "MessageDrivenStage for more than one stage");
  }
  out.push_back({StepOp::ReduceGradients, -1});
  out.push_back({StepOp::OptimizerStep, -1});
}

// ---- schedule.hpp ------------------------------------------------------------------

std::vector<StageLayout> stage_layouts(const model::ModelDescription& m, const std::vector<int64_t>& stage_units) {
  std::vector<StageLayout> out;
  int64_t unit = 0;
  size_t layer = 0;
  for (size_t s = 0; s < stage_units.size(); ++s) {
    StageLayout l;
    l.stage = static_cast<int64_t>(s);
    l.first_unit = unit;
    l.units = stage_units[s];
    l.first_layer = layer;
    unit += stage_units[s];
    while (layer < m.layers.size() && m.layers[layer].unit < unit) ++layer;
    l.last_layer = layer;
    out.push_back(l);
  }
  return out;
}

int64_t axonn_checkpoint_interval(int64_t blocks_per_stage, int64_t total_blocks) {
  const double target = std::sqrt(static_cast<double>(total_blocks));
  int64_t best = 1;
  for (int64_t f = 1; f <= blocks_per_stage; ++f)
    if (blocks_per_stage % f == 0 && std::abs(static_cast<double>(f) - target) < std::abs(static_cast<double>(best) - target))
      best = f;
  return best;
}

PassLayer pass_layer(const model::Layer& l, bool checkpointing, int64_t interval, int64_t first_unit,
                     topo::TensorLayout layout) {
  PassLayer p;
  const plan::LayoutRules& rules = plan::layout_rules(layout);
  p.gathers_input = rules.gathers_input && l.kind != model::LayerKind::Embedding;
  p.forward_collective = rules.forward_collective;
  p.gathers_output_grad = rules.gathers_output_grad;
  p.weighted = l.weight_elements() > 0;
  p.local_weight = p.weighted && rules.linear_weight_local && l.kind != model::LayerKind::Embedding;
  p.input_gradient = l.kind != model::LayerKind::Embedding;
  p.weight_in_backward = l.kind != model::LayerKind::Embedding;
  p.recomputed = checkpointing && l.recomputed;
  p.segment = (l.unit - first_unit) / std::max<int64_t>(interval, 1);
  return p;
}

void mark_cached(PassLayer* layers, size_t count, int64_t cache_layers) {
  int64_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    layers[i].cached = layers[i].weighted && !layers[i].local_weight && layers[i].recomputed && n < cache_layers;
    n += layers[i].cached;
  }
}

double gradient_shard_bytes(const model::Layer& l, const topo::Grid& g, int64_t grad_reduce_bytes) {
  return static_cast<double>(grad_reduce_bytes) * static_cast<double>(l.weight_elements()) /
         static_cast<double>(g.gx * g.gy * g.gz);
}

std::vector<PassLayer> pass_layers(const plan::Plan& p, const StageLayout& s) {
  std::vector<PassLayer> out;
  for (size_t i = s.first_layer; i < s.last_layer; ++i) {
    const model::Layer& l = p.model.layers[i];
    PassLayer pl = pass_layer(l, p.activation_checkpointing, p.checkpoint_interval, s.first_unit, p.grid.layout);
    pl.grad_bytes = gradient_shard_bytes(l, p.grid, p.precision.grad_reduce_bytes);
    out.push_back(pl);
  }
  mark_cached(out.data(), out.size(), p.overlap.cache_all_gather_layers);
  return out;
}

int64_t inflight_microbatches(plan::PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t microbatches,
                              int64_t limit) {
  if (stages == 1) return 1;
  switch (schedule) {
    case plan::PipelineSchedule::GPipe: return microbatches;
    case plan::PipelineSchedule::OneFOneB: return std::min(microbatches, stages - stage);
    case plan::PipelineSchedule::MessageDriven:  // the last stage runs each backward right after its forward
      return stage == stages - 1 ? 1 : std::min(microbatches, std::max<int64_t>(limit, 1));
  }
  return microbatches;
}

int64_t StageSchedule::layer_index(const std::string& name) const {
  for (size_t i = 0; i < layer_names.size(); ++i)
    if (layer_names[i] == name) return static_cast<int64_t>(i);
  return -1;
}

StageSchedule build_schedule(const plan::Plan& p, int64_t stage) { return build_schedule(p, stage, p.pipeline.schedule); }

StageSchedule build_schedule(const plan::Plan& p, int64_t stage, plan::PipelineSchedule pipeline) {
  const auto layouts = stage_layouts(p.model, p.stage_units());
  AXONN_ASSERT(stage >= 0 && stage < static_cast<int64_t>(layouts.size()));
  StageSchedule s;
  s.layout = layouts[static_cast<size_t>(stage)];
  s.stages = p.grid.ginter;
  s.microbatches = p.microbatches();
  s.limit = p.pipeline_limit();
  s.checkpoint_interval = p.checkpoint_interval;
  s.pipeline = pipeline;
  s.settings.overlap = p.overlap;
  s.settings.checkpointing = p.activation_checkpointing;
  s.settings.data_parallel = data_parallel_in_backward(p.grid, p.optimizer);
  s.optimizer = p.optimizer;
  s.precision = p.precision;
  s.layers = pass_layers(p, s.layout);
  for (size_t i = s.layout.first_layer; i < s.layout.last_layer; ++i) s.layer_names.push_back(p.model.layers[i].name);
  s.forward = pass_program(s.layers.data(), s.layers.size(), s.settings, PassKind::Forward);
  s.backward = pass_program(s.layers.data(), s.layers.size(), s.settings, PassKind::Backward);
  s.last_backward = pass_program(s.layers.data(), s.layers.size(), s.settings, PassKind::LastBackward);
  if (s.stages == 1 || pipeline != plan::PipelineSchedule::MessageDriven)
    s.steps = step_program(pipeline, stage, s.stages, s.microbatches);
  return s;
}

}  // namespace axonn::schedule
