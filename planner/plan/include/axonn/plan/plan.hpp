// The plan: what `axplan plan` writes and the runtime executes (format version 2,
// documented in docs/plan-format.md, JSON Schema in docs/plan.schema.json; version 1
// plans, which wrote the 5D grid's fields instead of the named mesh, still read). The
// pipeline settings and the checkpoint interval are optional fields: plans written
// before them read as message-driven, even stages, one block per checkpoint.
//
// A plan is self-contained: it embeds the model description and the topology it was
// made for, so the runtime needs no other file.
//
// Example:
//   axonn::plan::Plan p = axonn::plan::load_plan("plan.json");
//   p.grid.total();                 // must equal the MPI world size
//   p.overlap.prefetch_all_gather;  // switches of the four overlap optimizations
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/model/model_description.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::plan {

// The version written. 2: the ranks as a named mesh (`"mesh"`, `"tensor_layout"`);
// 1: the grid's fields (`"grid"`, `"placement_order"`). Both read.
inline constexpr int kPlanFormatVersion = 2;

// Seconds per training step spent in each kind of collective, per GPU.
// ar_x / ar_y are all-reduces over the X / Y process group, whichever layer (normal or
// transposed) issued them.
struct CommBreakdown {
  double ag_z = 0;      // all-gather of weight shards over Z
  double rs_z = 0;      // reduce-scatter of weight gradients over Z
  double ar_x = 0;      // all-reduces over X
  double ar_y = 0;      // all-reduces over Y
  double ar_data = 0;   // data-parallel gradient all-reduce
  double p2p_pipe = 0;  // pipeline point-to-point activations and gradients
  double p2p_seq = 0;   // ring self-attention's shifts of K, V (and dK, dV) in the sequence group
  // 2d and 3d: the activations' all-gathers and reduce-scatters (inputs, outputs and
  // their gradients) over X and over Y.
  double act_x = 0, act_y = 0;
  // The blocking collectives' wait for their group's last member and their fixed cost
  // per call (topology sync_wait and collective_call_s; docs/model.md section 8).
  // Measured inside the collectives' own times, not apart.
  double sync_wait = 0;
  // The small collectives: the layer norms' row statistics, the loss's reductions, 3d's
  // vector gradients, and the vectors' and loss's all-reduces over Z x data and the
  // pipeline once per step (docs/model.md section 8). Not in the paper model.
  double small = 0;
  // 2d-broadcast: SUMMA's moves in full, the input blocks' broadcasts and dI's reduces
  // along Y and the weight blocks' broadcasts and dW's reduces along Z (docs/model.md
  // section 15). They run under the products: what they leave exposed is
  // Evaluation::summa_exposed_s, which validate sets beside their measured waits.
  double summa = 0;

  double total() const {
    return ag_z + rs_z + ar_x + ar_y + ar_data + p2p_pipe + p2p_seq + act_x + act_y + sync_wait + small + summa;
  }
  CommBreakdown& operator+=(const CommBreakdown& o) {
    ag_z += o.ag_z;
    rs_z += o.rs_z;
    ar_x += o.ar_x;
    ar_y += o.ar_y;
    ar_data += o.ar_data;
    p2p_pipe += o.p2p_pipe;
    p2p_seq += o.p2p_seq;
    act_x += o.act_x;
    act_y += o.act_y;
    sync_wait += o.sync_wait;
    small += o.small;
    summa += o.summa;
    return *this;
  }
  CommBreakdown scaled(double f) const {
    return {ag_z * f,     rs_z * f,    ar_x * f,  ar_y * f,  ar_data * f,
            p2p_pipe * f, p2p_seq * f, act_x * f, act_y * f, sync_wait * f, small * f, summa * f};
  }
};

// Each term of CommBreakdown with its JSON name; `optional` terms are written only when
// not zero (plans from before them lack them).
struct BreakdownTerm {
  const char* name;
  double CommBreakdown::*seconds;
  bool optional;
};
inline constexpr std::array<BreakdownTerm, 12> kBreakdownTerms = {{{"ag_z", &CommBreakdown::ag_z, false},
                                                                  {"rs_z", &CommBreakdown::rs_z, false},
                                                                  {"ar_x", &CommBreakdown::ar_x, false},
                                                                  {"ar_y", &CommBreakdown::ar_y, false},
                                                                  {"ar_data", &CommBreakdown::ar_data, false},
                                                                  {"p2p_pipe", &CommBreakdown::p2p_pipe, false},
                                                                  {"p2p_seq", &CommBreakdown::p2p_seq, true},
                                                                  {"act_x", &CommBreakdown::act_x, true},
                                                                  {"act_y", &CommBreakdown::act_y, true},
                                                                  {"sync_wait", &CommBreakdown::sync_wait, true},
                                                                  {"small", &CommBreakdown::small, true},
                                                                  {"summa", &CommBreakdown::summa, true}}};

// The four overlap optimizations of the 4D paper (section IV) plus bucketing.
struct OverlapSettings {
  bool async_input_grad_all_reduce = true;       // 1: dI all-reduce overlapped with dW matmul
  bool async_weight_grad_reduce_scatter = true;  // 2: dW reduce-scatters waited for after backward
  bool prefetch_all_gather = true;               // 3: next layer's Z all-gather in flight
  int64_t cache_all_gather_layers = 0;           // 4: first N layers keep gathered weights
  bool bucketed_data_parallel_all_reduce = true; // gradient all-reduce in buckets during backward
  int64_t bucket_bytes = 25 * 1000 * 1000;       // bucket size for the above, bytes

  // Every switch off: issue each collective and wait for it at once.
  static OverlapSettings synchronous() { return level(0, 0); }
  // Cumulative levels (bench_overlap, axrun --overlap-level): 0 none; 1 + async dI
  // all-reduce; 2 + async dW reduce-scatter and bucketed data-parallel all-reduce;
  // 3 + all-gather prefetch; 4 + all-gather cache of `cache_layers` layers.
  static OverlapSettings level(int level, int64_t cache_layers) {
    OverlapSettings o;
    o.async_input_grad_all_reduce = level >= 1;
    o.async_weight_grad_reduce_scatter = o.bucketed_data_parallel_all_reduce = level >= 2;
    o.prefetch_all_gather = level >= 3;
    o.cache_all_gather_layers = level >= 4 ? cache_layers : 0;
    return o;
  }
};

// Element sizes (bytes) and the model state per parameter (without ZeRO or offload).
// The device holds the weights in `compute_bytes`, their gradients (accumulated over
// micro-batches and reduced over the data group) in `grad_reduce_bytes`, and the rest of
// `state_bytes_per_param` is the optimizer's: with a 2-byte compute type an fp32 master
// copy (4) and Adam's two fp32 moments (8). The runtime computes in bf16 for 2 bytes
// (fp16 has no CPU matmul in LibTorch 1.13) and fp32 for 4.
struct Precision {
  int64_t compute_bytes = 2;          // weights/activations in collectives and matmuls (bf16)
  int64_t grad_reduce_bytes = 4;      // gradients and their data-parallel all-reduce (fp32)
  int64_t state_bytes_per_param = 18; // bf16 weights 2 + fp32 gradients 4 + fp32 master 4 + Adam 8

  // Megatron-LM's bf16: fp32 gradient accumulation and all-reduce (18 bytes per parameter).
  static Precision bf16() { return {2, 4, 18}; }
  // AxoNN 2022's (seed-spec A4): bf16 gradients, all-reduced in bf16 after the loss was
  // pre-divided by the number of micro-batches; 16 bytes (the paper's 20 count an fp32
  // gradient copy that the runtime keeps one bucket of, not the whole).
  static Precision bf16_gradients() { return {2, 2, 16}; }
  // Everything in fp32 (the runtime on CPU): weights, gradients, Adam's two moments.
  static Precision fp32() { return {4, 4, 16}; }
  // Whether the optimizer keeps an fp32 master copy of the weights.
  bool mixed() const { return compute_bytes < 4; }
};

// Where the optimizer's state lives and how the optimizer phase runs (AxoNN 2022,
// section V; seed-spec A5-A6). Off: Adam on the device, the data-parallel reduction in
// the backward (OverlapSettings). On: the fp32 master weights and Adam's two moments in
// the host tier; the device keeps the weights and gradients in compute precision and
// one working set of `bucket_elements` elements (master, two moments, fp32 gradient:
// 16 bytes each). After the backward, the gradients are all-reduced over data in chunks
// of `allreduce_coarsening` buckets, and Adam runs on chunk c (a worker thread, the CPU
// stand-in for a second stream) while chunk c+1 is reduced.
// `zero` = 1 (ZeRO stage 1, Rajbhandari et al.; Colossal-AI, seed-spec C7): Adam's state
// (and, offloaded, the master weights) sharded over the data-parallel group. After the
// backward the gradients are reduce-scattered, each rank updates its shard, and the
// weights are all-gathered. `zero` = 2: the weight gradients are sharded too; each
// backward pass reduces each layer's gradient over the data group to the ranks that own
// its elements (DeepSpeed's stage 2 reduces per micro-batch alike). `zero` = 3: the
// weights too; each pass gathers a layer's weights from their owners when it fetches
// the layer (not with the message-driven pipeline and several replicas, whose passes
// run in different orders).
struct OptimizerSettings {
  bool offload = false;
  int64_t bucket_elements = int64_t{4} << 20;  // bsize, elements (the paper's section VI: 4M)
  int64_t allreduce_coarsening = 4;            // k, buckets per all-reduce chunk; 0: all at once, then Adam
  int64_t zero = 0;                            // ZeRO stage: 0, 1, 2 or 3
  static constexpr int64_t kMaxZeroStage = 3;  // the highest stage built

  // Whether the data-parallel reduction runs in the optimizer phase (after the backward)
  // instead of in the backward.
  bool reduces_data_parallel() const { return offload || zero > 0; }
};
// "device", "offload", "zero1", "zero2+offload", ...: the memory option in one word.
std::string optimizer_label(const OptimizerSettings& o);

// How a pipeline (Ginter > 1) orders its micro-batches (axonn/schedule/step.hpp).
enum class PipelineSchedule { MessageDriven, OneFOneB, GPipe };
const char* pipeline_schedule_name(PipelineSchedule s);  // "message-driven", "1f1b", "gpipe"
// Throws InputError (module `module`, location `where`) for another name.
PipelineSchedule parse_pipeline_schedule(const std::string& name, const std::string& module, const std::string& where);

struct PipelineSettings {
  PipelineSchedule schedule = PipelineSchedule::MessageDriven;
  int64_t limit = 0;                  // message-driven: micro-batches stage 0 keeps in flight (0 = Ginter)
  std::vector<int64_t> stage_units;   // pipeline units (blocks) per stage, in order; empty = as even as possible
};

// The units (blocks) of each of `stages` stages: `given` if not empty, else an even
// split with the remainder on the first stages (6 units on 4 stages: 2, 2, 1, 1).
std::vector<int64_t> stage_units_or_even(const std::vector<int64_t>& given, int64_t units, int64_t stages);

// L2L (seed 001, seed-spec B): the whole model and Adam's state live in the host tier
// (an eager parameter server); the device receives one pipeline unit (block) at a time,
// runs every micro-batch of the step through it (the loops inverted: layer-major), and
// hands its gradient back. Only each unit's output is kept between visits: the stash,
// on the device or in the host tier (the paper's two variants, its Table 5). The
// micro-batches per visit are the plan's (u = batch.seqs / gdata / microbatch_seqs).
// Runs on a grid of data parallelism only (gx = gy = gz = ginter = 1).
enum class Strategy { FourD, L2L };
const char* strategy_name(Strategy s);  // "4d", "l2l"
enum class StashTier { Host, Device };
const char* stash_tier_name(StashTier t);  // "host", "device"
struct L2LSettings {
  StashTier stash = StashTier::Host;
  bool prefetch = true;  // the next unit's weights copied while this one computes
};

struct BatchSettings {
  int64_t seqs = 0;             // sequences per step, all data-parallel groups together
  int64_t microbatch_seqs = 0;  // sequences per micro-batch in one data-parallel group
};

// The planner's device memory per GPU by part (planner/memory_model.hpp's
// MemoryBreakdown), bytes: what lives between steps (the model state: weights, their
// gradients, the optimizer's master copies and moments) and what a step adds at its
// peak (the rest). axrun sets its measurement of each beside it (docs/runtime.md).
struct MemoryPrediction {
  int64_t model_state = 0;
  int64_t gathered_weights = 0;
  int64_t unscattered_grads = 0;
  int64_t activations = 0;
  int64_t bucket_buffers = 0;
  int64_t optimizer_phase = 0;  // in place of the passes' parts when the optimizer's buffers are the peak
  int64_t held_between_steps() const { return model_state; }
  int64_t step_own() const {
    return gathered_weights + unscattered_grads + activations + bucket_buffers + optimizer_phase;
  }
};

struct Prediction {
  std::string comm_model;       // "paper" or "full"
  bool placement_aware = true;
  double comm_s = 0;            // per step, per GPU, bottleneck pipeline stage
  CommBreakdown comm_breakdown_s;
  // Full model only (absent/0 in paper mode), seconds per step (docs/model.md section 8):
  double batch_s = 0;           // predicted batch time
  double compute_s = 0;         // matmul time of the slowest stage
  double exposed_comm_s = 0;    // batch_s - compute_s
  int64_t memory_bytes_per_gpu = 0;
  int64_t host_memory_bytes_per_gpu = 0;  // the host tier (offloaded optimizer state); 0 without
  std::optional<MemoryPrediction> memory_breakdown_bytes;  // absent in plans written before it
  int64_t rank = 0;             // 1 = best of the candidates ranked
  int64_t candidates_ranked = 0;
};

struct Plan {
  int version = kPlanFormatVersion;  // as read (1 or 2); plan_to_json writes kPlanFormatVersion
  model::ModelDescription model;
  topo::Topology topology;
  int64_t gpus = 0;
  // The cost models' and the runtime's view of the plan's mesh (mesh(): what the file
  // holds), and the mesh's axis order, innermost first.
  topo::Grid grid;
  topo::PlacementOrder placement_order = topo::default_order();
  topo::Mesh mesh() const { return topo::grid_mesh(grid, placement_order); }
  BatchSettings batch;
  bool activation_checkpointing = true;
  // Blocks recomputed together under activation checkpointing (1: every block its own
  // checkpoint; AxoNN's rule: the factor of the blocks per stage closest to sqrt(blocks)).
  int64_t checkpoint_interval = 1;
  OverlapSettings overlap;
  Precision precision;
  OptimizerSettings optimizer;
  PipelineSettings pipeline;
  Strategy strategy = Strategy::FourD;
  L2LSettings l2l;  // read when strategy is L2L
  std::optional<Prediction> prediction;

  int64_t microbatches() const { return batch.seqs / grid.replicas() / batch.microbatch_seqs; }
  int64_t pipeline_limit() const { return pipeline.limit > 0 ? pipeline.limit : grid.ginter; }
  std::vector<int64_t> stage_units() const {
    return stage_units_or_even(pipeline.stage_units, model.num_units, grid.ginter);
  }
};

// Why axrun cannot run a plan of this model, in words (it runs GPT models: family
// "gpt"); nullopt when it can.
std::optional<std::string> runtime_problem(const model::ModelDescription& m);

nlohmann::json plan_to_json(const Plan& p);
// {"ag_z": ..., "p2p_pipe": ...} (and the optional terms of kBreakdownTerms when not 0), seconds: the plan's
// prediction and axplan's reports write the breakdown alike.
nlohmann::json breakdown_to_json(const CommBreakdown& b);
nlohmann::json memory_prediction_to_json(const MemoryPrediction& m);
// Validates every field and the consistency of the whole (grid product = gpus, grid
// divides the model and batch); throws axonn::Error naming `origin` and the field.
Plan plan_from_json(const nlohmann::json& j, const std::string& origin);
Plan load_plan(const std::string& path);
// Writes atomically (temporary file + rename).
void save_plan(const Plan& p, const std::string& path);

}  // namespace axonn::plan
