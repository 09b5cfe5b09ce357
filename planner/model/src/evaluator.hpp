// The planner's evaluation of grids for one (model, topology, options), set up once
// and used for every candidate (internal to planner/; the public entry points are
// evaluate(), rank_candidates() and explain() in planner.hpp and explain.hpp).
//
// A GPT's blocks repeat the same layers, so each candidate computes the costs,
// collectives, divisibility and memory figures of each distinct layer (a "class") once
// and then walks the layer sequence with those shared numbers. The walk keeps the
// per-layer order of every sum, so the result equals the per-layer evaluation of
// docs/model.md bit for bit: with Sharing::None every layer is its own class, and the
// tests compare the two on every shipped model. No allocation per candidate once a
// Scratch has grown to the model's size; evaluate() is const and may run on several
// threads, each with its own Scratch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/planner/pipeline_time.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::planner {

class Evaluator {
 public:
  enum class Sharing { IdenticalLayers, None };
  // Keeps references to `m` and `t`, which must outlive it. Computes with
  // t.compute_for(o.precision.compute_bytes) (topology_for_precision).
  Evaluator(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
            Sharing sharing = Sharing::IdenticalLayers);

  // Per-thread working memory, sized on first use.
  struct Scratch {
    std::vector<LayerCosts> costs;     // per class
    std::vector<LayerCollectives> alone;  // per class: with time-sliced ranks, the collectives
                                          // of axes whose rings are out of step, link alone
    // Per axis: the share of the passes its out-of-step rings' others are on the link
    // (bandwidth.hpp's out_of_step_share); 0 where eq. 10 stands.
    std::array<double, topo::kNumAxes> out_of_step_share{};
    // Per class, 2d-broadcast: the products SUMMA's moves overlap (forward, dW), seconds.
    std::vector<std::pair<double, double>> summa_products;
    std::vector<double> optimizer_s;   // per class
    std::vector<LayerActivations> activation_per_row;  // per class
    std::vector<double> unit_weight;   // per unit: predicted busy time (partition)
    std::vector<schedule::PassLayer> pass;       // per layer of the current stage
    std::vector<const LayerCosts*> pass_costs;   // per layer of the current stage
    std::vector<MemoryLayer> memory;   // per layer of the current stage
    std::vector<double> prefetch_done; // simulate_pass's working memory
    std::vector<StagePasses> stages;   // per stage
    std::vector<double> step_small_s;  // per stage: its once-per-step small collectives
    std::vector<double> link_s;        // per stage boundary: one pipeline message, seconds
    PipelineScratch pipeline;          // simulate_pipeline's working memory
    std::vector<StagePasses> lent;     // the stages' passes with their compute sped up (lent cores)
    std::vector<double> boundary_share;  // per stage boundary: a waiting rank's share of the cores
  };

  // After a feasible or memory-rejected evaluate(), `s` holds each class's costs.
  // `trace`: the simulated step of each stage (the planner's instruction list).
  Evaluation evaluate(const topo::Grid& g, Scratch& s,
                      std::vector<std::vector<SimulatedInstruction>>* trace = nullptr) const;
  // The same under another placement order than the options' (the order search).
  Evaluation evaluate(const topo::Grid& g, const topo::PlacementOrder& order, Scratch& s,
                      std::vector<std::vector<SimulatedInstruction>>* trace = nullptr) const;

  // The distinct layers, in order of first appearance, with their counts.
  struct LayerClass {
    const model::Layer* layer = nullptr;  // the first instance
    int64_t count = 0;
    ElementwiseRates rates;
  };
  const std::vector<LayerClass>& classes() const { return classes_; }
  // After evaluate(): the pass layers of `stage` (of the evaluated grid), as simulated.
  std::vector<schedule::PassLayer> stage_pass_layers(const Evaluation& e, const Scratch& s, int64_t stage) const;

 private:
  const model::ModelDescription& m_;
  std::shared_ptr<const topo::Topology> own_;  // the topology's compute for the plan's precision, where it differs
  const topo::Topology& t_;                    // *own_, else the caller's
  PlannerOptions o_;
  MatmulTimes matmul_;
  std::vector<LayerClass> classes_;
  std::vector<int32_t> class_of_;  // per layer
  bool chain_ = false;             // is_chain(m_), for the memory model
};

// Contiguous units per stage, every stage at least one, minimizing the largest sum of
// `unit_weight` over a stage (binary search on that sum, greedy packing).
std::vector<int64_t> balanced_stage_units(const std::vector<double>& unit_weight, int64_t stages);

}  // namespace axonn::planner
