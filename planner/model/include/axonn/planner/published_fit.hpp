// A GPU's compute model fitted to published training runs, and scored on the runs it
// was not fitted on (docs/validation.md, "Published GPU runs"; docs/model.md section 7).
//
// A published run gives a model, its grid, its batch and what it achieved (FLOP/s per
// GPU); its step time follows from the FLOPs of one step. The planner predicts each
// run's step on a topology whose compute is the roofline of section 7:
//   matmul        overhead + max(flops / (efficiency * peak), bytes / memory bandwidth)
//   element-wise  bytes moved / memory bandwidth
// fit_compute() picks the efficiency (and, if asked, the overhead) that minimize the
// squared relative errors of the fitted runs, and reports the error on the others.
//
// Example (Narayanan et al. 2021, Table 1, 1.7B on 32 A100s: 137 TFLOP/s per GPU):
//   megatron_step_flops(512, 2048, 24, 2304, 51200)  ->  1.547e16 FLOP
//   measured step = 1.547e16 / (32 * 137e12) = 3.53 s
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// FLOPs of one training step of a GPT with activation recomputation, as Narayanan et
// al. (2021) count them (their eq. 3: matmuls only, the forward run twice):
//   96 * B * s * l * h^2 * (1 + s/(6h) + V/(16 l h))
// for B sequences of s tokens, l layers of width h and a vocabulary of V.
double megatron_step_flops(int64_t batch_seqs, int64_t seq_len, int64_t layers, int64_t hidden, int64_t vocab);

// Their eq. 2, the parameters of that GPT: 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)).
double megatron_parameters(int64_t seq_len, int64_t layers, int64_t hidden, int64_t vocab);

// One published run: the model, its grid and batch, and its measured step time.
struct PublishedRun {
  std::string name;
  model::ModelDescription model;
  topo::Grid grid;
  int64_t batch_seqs = 0;       // global batch, sequences
  int64_t microbatch_seqs = 0;  // sequences per micro-batch (0: the planner's rule, docs/model.md section 4)
  double measured_step_s = 0;   // seconds per step
};

// A run's prediction next to its measurement.
struct RunPrediction {
  std::string name;
  double measured_s = 0;     // seconds per step
  double predicted_s = 0;    // seconds per step
  double memory_bytes = 0;   // the planner's peak per GPU (checked against nothing here)
  bool fitted = false;       // one of the runs the fit was made on
  double error() const { return predicted_s / measured_s - 1.0; }  // signed, fraction
};

// `base` with the compute model of a fit: matmul_flops_per_s = efficiency * peak,
// matmul_overhead_s = overhead_s (memory_bytes_per_s and any element-wise table kept).
topo::Topology with_compute(const topo::Topology& base, double efficiency, double overhead_s);

// The planner's prediction of each run on `t`, every setting but the grid, the batch and
// the micro-batch from `o` (memory is not a limit: the runs did run). `fitted` marks
// the runs of the fit.
std::vector<RunPrediction> predict_runs(const topo::Topology& t, const PlannerOptions& o,
                                        const std::vector<PublishedRun>& runs, const std::vector<size_t>& fitted);

// Mean |error| of the marked (fitted = true) or unmarked runs, fraction; 0 if none.
double mean_abs_error(const std::vector<RunPrediction>& p, bool fitted);

struct ComputeFit {
  double efficiency = 0;         // matmul_flops_per_s / peak_flops_per_s
  double matmul_overhead_s = 0;  // seconds per matmul call
  std::vector<RunPrediction> runs;
  double fitted_mape = 0;        // fraction, over the fitted runs
  double held_out_mape = 0;      // fraction, over the others
  // A fitted number ended at its search interval's edge (efficiency 0.05 or 1, overhead
  // 1 ms): the optimum lies outside, and the fit absorbs what the model gets wrong.
  bool at_bound = false;
};

// Fits the efficiency (in [0.05, 1]) and, with fit_overhead, the overhead per matmul
// (in [0, 1 ms]) to the runs numbered `fit_rows` (0-based) by golden-section search on
// the sum of their squared relative errors (the best efficiency for each overhead
// tried; each search assumes one minimum in its interval), then predicts every run.
// Throws InputError for an empty or out-of-range `fit_rows`.
ComputeFit fit_compute(const topo::Topology& base, const PlannerOptions& o, const std::vector<PublishedRun>& runs,
                       const std::vector<size_t>& fit_rows, bool fit_overhead);

}  // namespace axonn::planner
