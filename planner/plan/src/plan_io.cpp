// Plan JSON reading and writing; see axonn/plan/plan.hpp and docs/plan-format.md.

#include <algorithm>
#include <array>
#include <utility>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::plan {

std::string optimizer_label(const OptimizerSettings& o) {
  if (o.zero == 0) return o.offload ? "offload" : "device";
  return "zero" + std::to_string(o.zero) + (o.offload ? "+offload" : "");
}

const char* strategy_name(Strategy s) { return s == Strategy::L2L ? "l2l" : "4d"; }
const char* stash_tier_name(StashTier t) { return t == StashTier::Device ? "device" : "host"; }

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::MessageDriven: return "message-driven";
    case PipelineSchedule::OneFOneB: return "1f1b";
    case PipelineSchedule::GPipe: return "gpipe";
  }
  return "?";
}

PipelineSchedule parse_pipeline_schedule(const std::string& name, const std::string& module, const std::string& where) {
  for (auto s : {PipelineSchedule::MessageDriven, PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
    if (name == pipeline_schedule_name(s)) return s;
  throw InputError(module, "unknown pipeline schedule \"" + name + "\"", where, "message-driven, 1f1b or gpipe");
}

std::vector<int64_t> stage_units_or_even(const std::vector<int64_t>& given, int64_t units, int64_t stages) {
  if (!given.empty()) return given;
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(stages, 1)), units / std::max<int64_t>(stages, 1));
  for (int64_t i = 0; i < units % std::max<int64_t>(stages, 1); ++i) ++out[static_cast<size_t>(i)];
  return out;
}

namespace {

// The human-readable rank formula of a version 1 plan's placement order, innermost
// axis first: "rank = x + gx*(y + gy*(z + gz*(pipe + ginter*data)))".
std::string rank_formula(const topo::PlacementOrder& order) {
  auto size_name = [](topo::Axis a) {
    return a == topo::Axis::Pipe ? std::string("ginter")
                                 : a == topo::Axis::Data ? std::string("gdata")
                                                         : "g" + std::string(topo::axis_name(a));
  };
  std::string s = topo::axis_name(order[topo::kNumAxes - 1]);
  for (int i = topo::kNumAxes - 2; i >= 0; --i) {
    const std::string inner = i == topo::kNumAxes - 2 ? s : "(" + s + ")";
    s = std::string(topo::axis_name(order[i])) + " + " + size_name(order[i]) + "*" + inner;
  }
  return "rank = " + s;
}

// The same for a mesh: "rank = x + size(x)*(y + size(y)*(z + size(z)*(pipe + size(pipe)*data)))".
// It names the sizes rather than writing them, so that a mesh's sizes can be edited alone.
std::string rank_formula(const topo::Mesh& m) {
  const auto& axes = m.axes();
  if (axes.empty()) return "rank = 0";
  std::string s = axes.back().name;
  for (size_t i = axes.size() - 1; i-- > 0;) {
    const std::string inner = i + 2 == axes.size() ? s : "(" + s + ")";
    s = axes[i].name + " + size(" + axes[i].name + ")*" + inner;
  }
  return "rank = " + s;
}

CommBreakdown breakdown_from(ObjectReader r) {
  CommBreakdown b;
  for (const BreakdownTerm& t : kBreakdownTerms)
    if (!t.optional || r.has(t.name)) b.*t.seconds = r.non_negative_number(t.name);
  r.finish();
  return b;
}

// MemoryPrediction's parts as the plan names them, read and written alike.
constexpr std::array<std::pair<const char*, int64_t MemoryPrediction::*>, 6> kMemoryParts = {{
    {"model_state", &MemoryPrediction::model_state},
    {"gathered_weights", &MemoryPrediction::gathered_weights},
    {"unscattered_grads", &MemoryPrediction::unscattered_grads},
    {"activations", &MemoryPrediction::activations},
    {"bucket_buffers", &MemoryPrediction::bucket_buffers},
    {"optimizer_phase", &MemoryPrediction::optimizer_phase},
}};

MemoryPrediction memory_prediction_from(ObjectReader r) {
  MemoryPrediction m;
  for (const auto& [name, part] : kMemoryParts) m.*part = r.non_negative_int(name);
  r.finish();
  return m;
}

}  // namespace

nlohmann::json memory_prediction_to_json(const MemoryPrediction& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, part] : kMemoryParts) j[name] = m.*part;
  return j;
}

nlohmann::json breakdown_to_json(const CommBreakdown& b) {
  // The optional terms (kBreakdownTerms): sequence parallelism's ring (p2p_seq), the 2d
  // and 3d layouts' activations (act_x, act_y), sync_wait, small, SUMMA's moves (summa).
  nlohmann::json j = nlohmann::json::object();
  for (const BreakdownTerm& t : kBreakdownTerms)
    if (!t.optional || b.*t.seconds > 0) j[t.name] = b.*t.seconds;
  return j;
}

std::optional<std::string> runtime_problem(const model::ModelDescription& m) {
  if (m.family != "gpt")
    return "model '" + m.name + "' is of family \"" + m.family + "\"; axrun runs GPT models (family \"gpt\")";
  return std::nullopt;
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json j;
  j["format"] = "axonn-plan";
  j["version"] = kPlanFormatVersion;
  j["model"] = p.model.source;
  j["topology"] = topo::topology_to_json(p.topology);
  j["gpus"] = p.gpus;
  const topo::Mesh mesh = p.mesh();
  j["mesh"] = topo::mesh_to_json(mesh);
  j["tensor_layout"] = topo::layout_name(p.grid.layout);
  j["rank_layout"] = rank_formula(mesh);
  j["batch"] = {{"seqs", p.batch.seqs}, {"microbatch_seqs", p.batch.microbatch_seqs}};
  j["activation_checkpointing"] = p.activation_checkpointing;
  j["checkpoint_interval"] = p.checkpoint_interval;
  j["pipeline"] = {{"schedule", pipeline_schedule_name(p.pipeline.schedule)},
                   {"limit", p.pipeline_limit()},
                   {"stage_units", p.stage_units()}};
  const auto& o = p.overlap;
  j["overlap"] = {{"async_input_grad_all_reduce", o.async_input_grad_all_reduce},
                  {"async_weight_grad_reduce_scatter", o.async_weight_grad_reduce_scatter},
                  {"prefetch_all_gather", o.prefetch_all_gather},
                  {"cache_all_gather_layers", o.cache_all_gather_layers},
                  {"bucketed_data_parallel_all_reduce", o.bucketed_data_parallel_all_reduce},
                  {"bucket_bytes", o.bucket_bytes}};
  j["precision"] = {{"compute_bytes", p.precision.compute_bytes},
                    {"grad_reduce_bytes", p.precision.grad_reduce_bytes},
                    {"state_bytes_per_param", p.precision.state_bytes_per_param}};
  j["optimizer"] = {{"offload", p.optimizer.offload},
                    {"bucket_elements", p.optimizer.bucket_elements},
                    {"allreduce_coarsening", p.optimizer.allreduce_coarsening},
                    {"zero", p.optimizer.zero}};
  j["strategy"] = strategy_name(p.strategy);
  if (p.strategy == Strategy::L2L)
    j["l2l"] = {{"stash", stash_tier_name(p.l2l.stash)}, {"prefetch", p.l2l.prefetch}};
  if (p.prediction) {
    const auto& pr = *p.prediction;
    j["prediction"] = {{"comm_model", pr.comm_model},
                       {"placement_aware", pr.placement_aware},
                       {"comm_s", pr.comm_s},
                       {"comm_breakdown_s", breakdown_to_json(pr.comm_breakdown_s)},
                       {"memory_bytes_per_gpu", pr.memory_bytes_per_gpu},
                       {"host_memory_bytes_per_gpu", pr.host_memory_bytes_per_gpu},
                       {"rank", pr.rank},
                       {"candidates_ranked", pr.candidates_ranked}};
    if (pr.memory_breakdown_bytes)
      j["prediction"]["memory_breakdown_bytes"] = memory_prediction_to_json(*pr.memory_breakdown_bytes);
    if (pr.batch_s > 0) {
      j["prediction"]["batch_s"] = pr.batch_s;
      j["prediction"]["compute_s"] = pr.compute_s;
      j["prediction"]["exposed_comm_s"] = pr.exposed_comm_s;
    }
  }
  return j;
}

Plan plan_from_json(const nlohmann::json& j, const std::string& origin) {
  ObjectReader r(j, origin, "plan");
  Plan p;
  r.one_of("format", {"axonn-plan"});
  p.version = static_cast<int>(r.integer("version"));
  if (p.version != 1 && p.version != kPlanFormatVersion)
    r.fail("version", "unsupported plan version " + std::to_string(p.version),
           "1 or " + std::to_string(kPlanFormatVersion) + " (plans of a newer axplan need a newer axrun)");
  p.model = model::model_from_json(r.raw("model"), origin + " (embedded /model)");
  p.topology = topo::topology_from_json(r.raw("topology"), origin + " (embedded /topology)");
  p.gpus = r.positive_int("gpus");
  if (p.version == 1) {  // the 5D grid's fields and the order of its axes
    p.grid = topo::grid_from_json(r.object("grid"));
    auto order = r.string_array("placement_order");
    std::string text;
    for (const auto& a : order) text += (text.empty() ? "" : ",") + a;
    p.placement_order = topo::parse_order(text, "plan", r.where("placement_order"));
    const auto& layout = r.raw("rank_layout");
    if (!layout.is_string() || layout.get<std::string>() != rank_formula(p.placement_order))
      r.fail("rank_layout", "does not match placement_order", "\"" + rank_formula(p.placement_order) + "\"");
  } else {  // the named mesh
    const topo::Mesh mesh = topo::mesh_from_json(r, "mesh");
    const auto layout = topo::parse_layout(r.string("tensor_layout"), "plan", r.where("tensor_layout"));
    const auto placed = topo::grid_of_mesh(mesh, layout, "plan", r.where("mesh"));
    p.grid = placed.grid;
    p.placement_order = placed.order;
    const auto& formula = r.raw("rank_layout");
    if (!formula.is_string() || formula.get<std::string>() != rank_formula(mesh))
      r.fail("rank_layout", "does not match the mesh", "\"" + rank_formula(mesh) + "\"");
  }
  const std::string grid_field = p.version == 1 ? "grid" : "mesh";  // where the ranks' shape is
  if (p.grid.total() != p.gpus)
    r.fail(grid_field,
           "has " + std::to_string(p.grid.total()) + " ranks (" + p.grid.to_string() + ") but gpus is " +
               std::to_string(p.gpus),
           "a product of sizes equal to gpus");
  {
    auto b = r.object("batch");
    p.batch.seqs = b.positive_int("seqs");
    p.batch.microbatch_seqs = b.positive_int("microbatch_seqs");
    b.finish();
  }
  p.activation_checkpointing = r.boolean("activation_checkpointing");
  p.checkpoint_interval = r.positive_int_or("checkpoint_interval", 1);
  if (r.has("pipeline")) {
    auto pl = r.object("pipeline");
    p.pipeline.schedule = parse_pipeline_schedule(pl.one_of("schedule", {"message-driven", "1f1b", "gpipe"}), "plan",
                                                  pl.where("schedule"));
    p.pipeline.limit = pl.positive_int_or("limit", 0);
    if (pl.has("stage_units")) {
      const auto& units = pl.raw("stage_units");
      if (!units.is_array()) pl.fail("stage_units", "not an array", "an array of positive integers, one per stage");
      for (const auto& u : units) {
        if (!u.is_number_integer() || u.get<int64_t>() < 1)
          pl.fail("stage_units", "holds " + u.dump(), "an array of positive integers, one per stage");
        p.pipeline.stage_units.push_back(u.get<int64_t>());
      }
    }
    pl.finish();
  }
  {
    auto o = r.object("overlap");
    p.overlap.async_input_grad_all_reduce = o.boolean("async_input_grad_all_reduce");
    p.overlap.async_weight_grad_reduce_scatter = o.boolean("async_weight_grad_reduce_scatter");
    p.overlap.prefetch_all_gather = o.boolean("prefetch_all_gather");
    p.overlap.cache_all_gather_layers = o.non_negative_int("cache_all_gather_layers");
    p.overlap.bucketed_data_parallel_all_reduce = o.boolean("bucketed_data_parallel_all_reduce");
    p.overlap.bucket_bytes = o.positive_int("bucket_bytes");
    o.finish();
  }
  {
    auto pr = r.object("precision");
    p.precision.compute_bytes = pr.positive_int("compute_bytes");
    p.precision.grad_reduce_bytes = pr.positive_int("grad_reduce_bytes");
    p.precision.state_bytes_per_param = pr.positive_int("state_bytes_per_param");
    pr.finish();
  }
  if (r.has("optimizer")) {  // plans written before the memory tiers: on the device
    auto o = r.object("optimizer");
    p.optimizer.offload = o.boolean("offload");
    p.optimizer.bucket_elements = o.positive_int("bucket_elements");
    p.optimizer.allreduce_coarsening = o.non_negative_int("allreduce_coarsening");
    p.optimizer.zero = o.non_negative_int_or("zero", 0);
    if (p.optimizer.zero > OptimizerSettings::kMaxZeroStage)
      o.fail("zero", "ZeRO stage " + std::to_string(p.optimizer.zero), "0, 1, 2 or 3");
    o.finish();
  }
  if (r.has("strategy"))  // plans written before L2L: the 4D strategy
    p.strategy = r.one_of("strategy", {"4d", "l2l"}) == std::string("l2l") ? Strategy::L2L : Strategy::FourD;
  if (p.strategy == Strategy::L2L) {
    auto l = r.object("l2l");
    p.l2l.stash = l.one_of("stash", {"host", "device"}) == std::string("device") ? StashTier::Device : StashTier::Host;
    p.l2l.prefetch = l.boolean("prefetch");
    l.finish();
    const auto& g = p.grid;
    if (g.gx != 1 || g.gy != 1 || g.gz != 1 || g.ginter != 1 || g.sequence != 1)
      r.fail(grid_field, "strategy l2l on grid " + g.to_string(),
             "gx = gy = gz = ginter = 1, no sequence group (L2L runs data parallelism only)");
    if (p.optimizer.offload || p.optimizer.zero > 0)
      r.fail("optimizer", "strategy l2l with optimizer " + optimizer_label(p.optimizer),
             "offload false and zero 0 (L2L's parameter server holds Adam's state in the host tier)");
  } else if (r.has("l2l")) {
    r.fail("l2l", "present while the strategy is 4d", "no l2l object unless strategy is \"l2l\"");
  }
  if (r.has("prediction")) {
    auto pr = r.object("prediction");
    Prediction pd;
    pd.comm_model = pr.one_of("comm_model", {"paper", "full"});
    pd.placement_aware = pr.boolean("placement_aware");
    pd.comm_s = pr.non_negative_number("comm_s");
    pd.comm_breakdown_s = breakdown_from(pr.object("comm_breakdown_s"));
    pd.memory_bytes_per_gpu = pr.non_negative_int("memory_bytes_per_gpu");
    pd.host_memory_bytes_per_gpu = pr.has("host_memory_bytes_per_gpu") ? pr.non_negative_int("host_memory_bytes_per_gpu") : 0;
    if (pr.has("memory_breakdown_bytes"))
      pd.memory_breakdown_bytes = memory_prediction_from(pr.object("memory_breakdown_bytes"));
    pd.rank = pr.positive_int("rank");
    pd.candidates_ranked = pr.positive_int("candidates_ranked");
    pd.batch_s = pr.non_negative_number_or("batch_s", 0.0);
    pd.compute_s = pr.non_negative_number_or("compute_s", 0.0);
    pd.exposed_comm_s = pr.non_negative_number_or("exposed_comm_s", 0.0);
    pr.finish();
    p.prediction = pd;
  }
  r.finish();
  if (!p.pipeline.stage_units.empty()) {
    int64_t sum = 0;
    for (int64_t u : p.pipeline.stage_units) sum += u;
    if (static_cast<int64_t>(p.pipeline.stage_units.size()) != p.grid.ginter || sum != p.model.num_units)
      throw InputError("plan",
                       "pipeline/stage_units has " + std::to_string(p.pipeline.stage_units.size()) + " stages of " +
                           std::to_string(sum) + " units in all",
                       origin + ": /pipeline/stage_units",
                       "ginter = " + std::to_string(p.grid.ginter) + " entries summing to the model's " +
                           std::to_string(p.model.num_units) + " pipeline units");
  }
  if (auto why = divisibility_problem(p.model, p.grid, p.batch.seqs, p.batch.microbatch_seqs))
    throw InputError("plan", "grid does not divide the model or batch: " + *why, r.where(grid_field),
                "a grid whose sizes divide every layer, the heads and the batch (docs/model.md)");
  return p;
}

Plan load_plan(const std::string& path) {
  return plan_from_json(read_json_file("plan", path), path);
}

void save_plan(const Plan& p, const std::string& path) {
  write_file_atomically(path, plan_to_json(p).dump(2) + "\n", "plan");
}

}  // namespace axonn::plan
