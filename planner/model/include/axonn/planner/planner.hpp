// The planner: enumerate every (Gx, Gy, Gz, Gdata, Ginter) grid for a GPU count,
// reject those that do not divide the model or do not fit memory, predict each
// one's communication time, and rank them (docs/model.md).
//
// Example:
//   PlannerOptions o;  o.gpus = 32;  o.batch_seqs = 16;
//   Ranking r = rank_candidates(load_model("gpt-20b"), load_topology("perlmutter"), o);
//   r.feasible.front().grid;     // the grid with the least predicted communication
//   r.rejected.front().rejected_because;   // e.g. "memory 51.3 GiB > 40.0 GiB"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// paper: the fixed mode that reproduces the 4D paper's model (docs/model.md section 6);
// full: every layer, micro-batches, latency, pipeline traffic, the straddle rule.
enum class CommModel { Paper, Full };
const char* comm_model_name(CommModel m);

struct PlannerOptions {
  int64_t gpus = 0;
  int64_t batch_seqs = 0;          // sequences per step, all data-parallel groups together
  CommModel comm_model = CommModel::Full;
  bool placement_aware = true;
  bool memory_limit = true;
  topo::PlacementOrder order = topo::default_order();
  // Also try, for each grid, every other order of its groups of 2 or more
  // (placement_orders()), and keep the fastest (--search-order; placement-aware only,
  // as the agnostic model does not depend on the order).
  bool search_order = false;
  int64_t microbatch_seqs = 0;     // 0: the default rule (docs/model.md section 4)
  bool activation_checkpointing = true;
  plan::OverlapSettings overlap;
  plan::Precision precision;
  plan::OptimizerSettings optimizer;  // offload, ZeRO: the memory model's and the optimizer phase's
  // Also try, for each grid, the optimizer offloaded, ZeRO-1 and -2 (Gdata > 1), each
  // alone and offloaded, with
  // `optimizer`'s bucket size and coarsening, and keep the best (memory_options()).
  bool search_memory_options = false;
  // Pipelines (Ginter > 1): the schedule, its limit (0 = Ginter) and the units per stage
  // (empty: balanced by predicted stage time).
  plan::PipelineSchedule pipeline_schedule = plan::PipelineSchedule::MessageDriven;
  int64_t pipeline_limit = 0;
  std::vector<int64_t> stage_units;
  // Blocks recomputed together (1: each block; 0: AxoNN's rule, the factor of the blocks
  // per stage closest to sqrt(blocks)).
  int64_t checkpoint_interval = 1;
  int64_t threads = 0;             // rank_candidates: threads evaluating grids (0 = one per core)
  // Which strategies rank_candidates ranks together: the 4D grids, and L2L (grid
  // 1,1,1,gpus,1; planner/l2l_model.hpp) with each u that divides a replica's sequences
  // (or `l2l_microbatches`) and each stash tier (or `l2l_stash`).
  bool rank_4d = true;
  bool rank_l2l = false;
  // Tensor modes of the 4D grids (--tensor-mode; plan/tensor_mode.hpp's registry), by
  // name: their grids are enumerated in the registry's order, each once (1d's are
  // axonn3d's, 2.5d's are 2d's); AxoNN's 3D alone by default.
  std::vector<std::string> tensor_modes = {"axonn3d"};
  int64_t l2l_microbatches = 0;  // 0: every divisor
  std::optional<plan::StashTier> l2l_stash;  // unset: host and device
  bool l2l_prefetch = true;
};

enum class Rejection { None, Divisibility, Memory };

struct Evaluation {
  plan::Strategy strategy = plan::Strategy::FourD;
  plan::L2LSettings l2l;           // L2L only: the stash tier and prefetch
  topo::Grid grid;
  topo::PlacementOrder order = topo::default_order();  // the placement evaluated (searched: the best)
  bool feasible = false;
  Rejection rejection = Rejection::None;
  std::string rejected_because;    // empty when feasible
  int64_t microbatch_seqs = 0;
  int64_t microbatches = 0;
  plan::CommBreakdown comm;        // seconds per step, bottleneck stage
  double comm_s = 0;               // all communication of that stage, hidden or not
  // Calls of the small collectives (comm.small) per step of the first stage, the one rank
  // 0 runs (validate sets them beside the runtime's count); 0 in paper mode.
  int64_t small_calls = 0;
  // 2d-broadcast: what SUMMA's moves (comm.summa) leave exposed beside the products,
  // seconds per step of the same stage as comm (layer_comm.hpp's summa_*_exposed_s).
  double summa_exposed_s = 0;
  // Full model only (0 in paper mode), seconds per step (docs/model.md section 8):
  double batch_s = 0;              // predicted batch time
  double compute_s = 0;            // matmuls of the slowest stage
  double exposed_comm_s = 0;       // batch_s - compute_s: communication not hidden, and the
                                   // pipeline bubble (Ginter > 1)
  MemoryBreakdown memory;          // the stage needing the most memory
  plan::OptimizerSettings optimizer;  // the settings evaluated (searched: the best)
  std::vector<int64_t> stage_units;  // units (blocks) per pipeline stage; {units} without a pipeline
  int64_t checkpoint_interval = 1;   // blocks recomputed together
  double bubble_fraction = 0;        // pipelines: the slowest stage's idle share before its tail
  // Time-sliced pipelines: how much faster the stages compute while others wait and lend
  // their cores (docs/model.md section 10, "Waiting stages lend their cores"); 1 = none.
  double lent_core_speedup = 1;
};

// "4d"; "1d" for a 4D grid 1,t,1,gdata,ginter (t >= 2: the same operators as
// Megatron's 1D, column-parallel then row-parallel); "sequence 4" (the sequence group);
// or "l2l u=4 host" (the micro-batches, the stash tier, "no-prefetch" when off).
std::string strategy_label(const Evaluation& e);

// The tensor mode of a 4D grid (plan::tensor_mode_of's name): "sequence"
// (Grid::sequence > 1), "2d", "3d", "1d" (1,t,1,gdata,ginter with t >= 2 in AxoNN's
// layout) or "axonn3d" (every other grid).
std::string tensor_mode_name(const topo::Grid& g);

// Sets o.tensor_modes for the --tensor-mode named `mode`: a registered mode
// (plan::tensor_modes()), or all (those ranked together: axonn3d, sequence, 2d and 3d,
// 1d being among axonn3d's grids and 2.5d's being 2d's). Throws InputError (naming
// `where`) for another name.
void select_tensor_modes(PlannerOptions& o, const std::string& mode, const std::string& where);

// docs/model.md section 4: one micro-batch without a pipeline; with one, the fewest
// micro-batches (at least Ginter, to fill it) whose size divides over Z. 0 if none.
int64_t default_microbatch_seqs(int64_t per_group, int64_t gz, int64_t ginter);

// Every ordered (gx, gy, gz, gdata, ginter) with product `gpus`, all divisors.
std::vector<topo::Grid> enumerate_grids(int64_t gpus);
// The grids of the tensor mode named `mode` for `gpus` GPUs, in enumerate_grids'
// order (plan::TensorMode::candidates of each). Throws InputError for an unknown name.
std::vector<topo::Grid> enumerate_mode_grids(const std::string& mode, int64_t gpus);

// Throws axonn::Error for requests that no grid can satisfy whatever its shape:
// GPU count vs topology, batch size.
void check_request(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o);

// The optimizer settings a grid is evaluated with: o.optimizer, then (with
// o.search_memory_options) offloaded, ZeRO-1, ZeRO-2, each ZeRO offloaded, the ZeRO ones only
// where Gdata > 1, each once.
std::vector<plan::OptimizerSettings> memory_options(const PlannerOptions& o, const topo::Grid& g);

// The placement orders that lay `g` out differently: `base` first, then every other
// order of g's axes of size 2 or more, each in the positions those axes hold in `base`
// (axes of size 1 place no rank, so moving them changes nothing). k! orders for k such
// axes; just `base` when k < 2.
std::vector<topo::PlacementOrder> placement_orders(const topo::Grid& g, const topo::PlacementOrder& base);

// Which of two evaluations of one grid the search keeps: feasible over rejected; then
// the ranking's order (batch or communication time, then memory); among memory
// rejections the one needing the least. Ties keep `b`.
bool better_evaluation(const Evaluation& a, const Evaluation& b, CommModel model);

// With o.search_memory_options: the best over memory_options(o, g); with
// o.search_order (placement-aware), the best over placement_orders(g, o.order) as well.
Evaluation evaluate(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                    const PlannerOptions& o);
// The same evaluation with every layer costed on its own instead of once per distinct
// layer: slower, and equal to evaluate() bit for bit (the check of the sharing).
Evaluation evaluate_layer_by_layer(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                                   const PlannerOptions& o);

struct Ranking {
  std::vector<Evaluation> feasible;  // best first: least batch_s (full), least comm_s (paper)
  std::vector<Evaluation> rejected;  // in enumeration order
};

// Enumerates, evaluates and sorts (full: by batch time; paper: by communication time).
// With --comm-model paper only Ginter = 1 is enumerated. Identical layers are costed
// once per candidate and candidates are spread over threads; the result is the same
// as evaluate() on each grid, whatever the thread count.
Ranking rank_candidates(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o);

// The plan for one evaluated grid (`rank` of `candidates`, 1 = best), with its prediction.
plan::Plan make_plan(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
                     const Evaluation& e, int64_t rank, int64_t candidates);

// Why nothing is feasible, in words (e.g. "smallest memory per GPU is 71.2 GiB > 40.0 GiB").
std::string explain_infeasible(const Ranking& r, const topo::Topology& t);

}  // namespace axonn::planner
