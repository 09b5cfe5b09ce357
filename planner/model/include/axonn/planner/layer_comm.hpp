// Communication time of one layer per training step (the 4D paper's eqs. 4-9,
// docs/model.md section 3). Pure function of the layer, the grid and the bandwidths.
//
// Normal layer O = I*W, W is k x n, m = tokens of one micro-batch in one
// data-parallel group, w = element size, wg = gradient element size:
//   per micro-batch:
//     n_ag  * t_AG(Gz, w*k*n/(Gx*Gy))   over Z     weight all-gather
//           + t_RS(Gz, w*k*n/(Gx*Gy))   over Z     weight-gradient reduce-scatter
//     n_fwd * t_AR(Gx, w*m*n/(Gy*Gz))   over X     forward partial-output all-reduce
//           + t_AR(Gy, w*m*k/(Gx*Gz))   over Y     backward input-gradient all-reduce
//   per step:
//           + t_AR(Gdata, wg*k*n/(Gx*Gy*Gz)) over data
// A transposed layer (and an embedding, which is a transposed layer whose input is a
// one-hot token matrix with no gradient) swaps X and Y.
//
// Example (normal, k=n=1024, m=4096, Gx=Gy=Gz=2, every group at 100 GB/s, w=2, n_ag=2):
//   ag_z = 2 * (1/2) * (2*1024*1024/4 = 524288 B) / 100e9 B/s      = 5.24e-6 s
//   ar_x = 2 * (1/2) * (2*4096*1024/4 = 2097152 B) / 100e9 B/s     = 2.10e-5 s
#pragma once

#include <cstdint>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::planner {

struct LayerCommSettings {
  int64_t tokens = 0;               // m: tokens of one micro-batch in one data-parallel group
  int64_t microbatches = 1;         // per step; tensor-parallel terms are paid per micro-batch
  int64_t all_gathers = 2;          // n_ag per micro-batch (forward + backward/recompute; 1 cached)
  int64_t forward_all_reduces = 1;  // n_fwd per micro-batch (2 with activation recompute)
  bool input_gradient = true;       // backward dI all-reduce (false for embeddings)
  int64_t element_bytes = 2;        // w
  int64_t grad_reduce_bytes = 4;    // wg
  AxisLatencies latency_s{};        // alpha per ring step of each axis's group, seconds
  double sequence_bw = 0;           // bytes/s of the sequence group's ring (Grid::sequence > 1)
  double sequence_latency_s = 0;    // alpha per shift of the sequence group's ring, seconds
  // A non-ring all-gather (topo::NonblockingCollectives): how many times a ring's time
  // the all-gather of each axis's group takes (collectives.hpp; 1 for a ring).
  std::array<double, topo::kNumAxes> all_gather_slowdown{1, 1, 1, 1, 1};
  // One-way bandwidth of each axis's broadcasts and reduces (2d-broadcast's SUMMA steps;
  // bandwidth.hpp's one_way_group_bandwidth), bytes/s; 0: the axis's ring bandwidth.
  std::array<double, topo::kNumAxes> one_way_bytes_per_s{};
  bool small_collectives = false;   // model the layer norms', the loss's and 3d's vector
                                    // all-reduces (docs/model.md section 8; not the paper model)
};

// One occurrence of each collective of a layer for one micro-batch, seconds (the
// timeline of batch_time.hpp), and the bytes of its data-parallel gradient shard.
struct LayerCollectives {
  double all_gather_s = 0;             // Z, weight block
  double reduce_scatter_s = 0;         // Z, weight-gradient block
  double forward_all_reduce_s = 0;     // over a (X for normal layers)
  double input_grad_all_reduce_s = 0;  // over b (Y for normal layers); 0 without input gradient
  double data_all_reduce_s = 0;        // over data, per step
  double data_bytes = 0;
  // Attention with sequence parallelism (collectives.hpp's ring self-attention): the
  // shifts of one forward and of one backward, blocking (not overlapped in the model).
  double ring_forward_s = 0, ring_backward_s = 0;
  topo::Axis a = topo::Axis::X, b = topo::Axis::Y;
  // The 2d and 3d layouts (docs/model.md sections 15, 16): the input's all-gather
  // before the compute (over b), and in 3d the output gradient's all-gather before the
  // backward (over a); forward_all_reduce_s is then 3d's reduce-scatter of the output
  // (over a; none in 2d) and input_grad_all_reduce_s the dI reduce-scatter (over b).
  // They are CommBreakdown::act_x / act_y.
  bool gathers_input = false;
  double input_gather_s = 0, output_grad_gather_s = 0;
  // Each blocking collective of the layer also waits this fraction of the compute since
  // the previous one (topology sync_wait of the tensor group; set by the caller, 0 here;
  // batch_time.hpp).
  double sync_wait_fraction = 0;
  double sync_call_s = 0;  // and this fixed cost (topology collective_call_s), seconds
  // The small collectives inside the layer's compute (docs/model.md section 8, "Small
  // collectives"), blocking, for one micro-batch: in its forward, the layer norm before
  // it (1 all-reduce of fp64 row statistics over the hidden group) and the loss after it
  // (2 over Y); in its backward input pass, the layer norm's (1) and, in the 3d layout,
  // its bias's (1) and the norm's gain and shift (1). Seconds of all of them, and how
  // many calls (each pays sync_call_s).
  double small_forward_s = 0, small_backward_s = 0;
  int64_t small_forward_calls = 0, small_backward_calls = 0;
  // The 2d-broadcast layout (docs/model.md section 15, "The broadcast form"): SUMMA's
  // q steps inside the layer's computes, each moving one block of the input along Y
  // (broadcast; in the backward also dI's reduce) and one of the weight along Z
  // (broadcast; dW's reduce), seconds of one step's move. 0 steps: another layout.
  int64_t summa_steps = 0;
  double summa_input_broadcast_s = 0, summa_weight_broadcast_s = 0;
  double summa_input_reduce_s = 0, summa_weight_reduce_s = 0;
  // Gradient elements of the layer's vectors on one GPU (biases, the norm's gain and
  // shift): reduced over Z x data once per step (step_small_collectives).
  double vector_elements = 0;
};
LayerCollectives layer_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                                   const LayerCommSettings& s);

// What SUMMA's moves leave exposed in a 2d-broadcast layer's passes, seconds, given the
// products they overlap (runtime/summa.hpp's order; docs/model.md section 15).
// Forward, `compute_s` its products: step 0's two broadcasts, then each later step's
// under the previous step's product:  B + (q - 1) max(0, B - compute_s / q),
// B = input + weight broadcast.
double summa_forward_exposed_s(const LayerCollectives& c, double compute_s);
// Backward, `weight_compute_s` the dW products: per step the weight's broadcast, dI's
// product, then dI's reduce beside the input's broadcast, dW's product and dW's reduce:
//   q (Bw + max(Rx - cw, Bx + Rw)),  cw = weight_compute_s / q.
double summa_backward_exposed_s(const LayerCollectives& c, double weight_compute_s);

// Seconds per step, by collective, from one occurrence of each: `microbatches` times
// (n_ag all-gathers, one reduce-scatter, n_fwd forward and one backward all-reduce,
// and the small collectives of n_fwd forwards and one backward), plus the data-parallel
// all-reduce once.
inline plan::CommBreakdown comm_per_step(const LayerCollectives& one, int64_t microbatches, int64_t all_gathers,
                                         int64_t forward_all_reduces) {
  plan::CommBreakdown c;
  const double mb = static_cast<double>(microbatches);
  c.ag_z = mb * static_cast<double>(all_gathers) * one.all_gather_s;
  c.rs_z = mb * one.reduce_scatter_s;
  const double fwd = mb * static_cast<double>(forward_all_reduces) * one.forward_all_reduce_s;
  const double bwd = mb * one.input_grad_all_reduce_s;
  if (one.gathers_input) {
    const double gather = mb * static_cast<double>(forward_all_reduces) * one.input_gather_s;
    (one.b == topo::Axis::X ? c.act_x : c.act_y) += gather + bwd;
    (one.a == topo::Axis::X ? c.act_x : c.act_y) += fwd + mb * one.output_grad_gather_s;
  } else {
    (one.a == topo::Axis::X ? c.ar_x : c.ar_y) += fwd;
    (one.b == topo::Axis::X ? c.ar_x : c.ar_y) += bwd;
  }
  if (one.summa_steps > 0) {  // n_fwd forwards and one backward: SUMMA's moves in full
    const double q = static_cast<double>(one.summa_steps), forwards = static_cast<double>(forward_all_reduces);
    c.summa = mb * q *
              ((forwards + 1.0) * (one.summa_input_broadcast_s + one.summa_weight_broadcast_s) +
               one.summa_input_reduce_s + one.summa_weight_reduce_s);
  }
  c.ar_data = one.data_all_reduce_s;
  c.small = mb * (static_cast<double>(forward_all_reduces) * one.small_forward_s + one.small_backward_s);
  c.p2p_seq = mb * (static_cast<double>(forward_all_reduces) * one.ring_forward_s + one.ring_backward_s);
  return c;
}

// The small collectives a stage issues once per step, seconds, blocking, after its last
// backward pass: its vectors' gradients (`vector_elements` on one GPU, `grad_bytes`
// each) reduced over Z x data, and the loss summed over Z x data, over X in the 3d
// layout (the logits' rows) and over the pipeline, one element each. The vectors go in
// one all-reduce (the runtime's reducer), or as the optimizer phase issues them: a
// reduce-scatter and an all-gather under ZeRO, chunks of allreduce_coarsening x
// bucket_elements elements offloaded. Over Z x data the bandwidth is the slower of the
// two groups', the latency the data group's (which spans Z's under the default order)
// or, without one, Z's; over X and the pipeline, theirs (bw, latency).
struct StepCollectives {
  double seconds = 0;
  int64_t calls = 0;
};
StepCollectives step_small_collectives(double vector_elements, int64_t grad_bytes, const topo::Grid& g,
                                       const AxisBandwidths& bw, const AxisLatencies& latency,
                                       const plan::OptimizerSettings& optimizer = {});

// Seconds per step, by collective (comm_per_step of layer_collectives). Attention
// layers cost nothing but their ring with sequence parallelism.
plan::CommBreakdown layer_comm(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                               const LayerCommSettings& s);

}  // namespace axonn::planner
