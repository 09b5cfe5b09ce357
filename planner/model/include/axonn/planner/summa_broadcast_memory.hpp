// Device memory of SUMMA in its broadcast form (runtime::summa_linear: Colossal-AI's 2D,
// and each depth layer of its 2.5D) for a chain of linear layers: the most bytes one rank
// holds during the first forward and backward pass of a run (no optimizer state, no
// gradient before the backward), the measure of the paper's memory experiment
// (docs/model.md section 15, "The broadcast form"). Pure function. The GPT's 2d layers run
// the collective form, which stage_memory() (memory_model.hpp) predicts; this one predicts
// the operator that tools/measure_two_linear measures beside it.
//
// On a grid 1,q,q,d in the 2d layout (q >= 2), R = tokens / (d q) rows per rank's block;
// for layer l (k_l x n_l) and element size w (bytes):
//   A_l = w R k_l / q        its input block (X-sized)
//   O_l = w R n_l / q        its output block (its output gradient too)
//   B_l = w k_l n_l / q^2    its weight block (W-sized)
// The peak is a layer's backward, at the last of its q steps, on rank (0, 0) (any rank
// whose row and column ranks are below q - 1):
//   backward of l  sum_{m<=l} A_m (the inputs kept) + sum_{m>l} B_m (the later layers'
//                  gradients) + O_l (its output gradient) + 3 A_l + 3 B_l (its dI and
//                  dW, kept since it rooted both reduces of step 0; the received X and W
//                  blocks; the step's two products dY W^T and X^T dY)
//   peak           sum_l B_l (the weights) + the largest backward moment
// The forward of l holds the same inputs, O_l being summed and min(q - 1, 2) received
// blocks of X and of W (a step's and the next one's, in flight under its matmul): always
// less than its own backward (2 < 3), so it is not a term.
//
// Example (two layers 1024 x 4096 and 4096 x 1024, 512 tokens, fp32, grid 1,2,2):
//   A = 0.5, 2 MiB; O = 2, 0.5 MiB; B = 4, 4 MiB; the peak is the second layer's backward:
//   8 + (0.5 + 2) + 0.5 + 3 * 2 + 3 * 4 = 29 MiB.
#pragma once

#include <cstdint>

#include "axonn/model/model_description.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::planner {

// Bytes (see above); `tokens` is the whole batch's (all d depth layers'). Throws
// InputError unless `g` is a 2d-layout grid 1,q,q,d,1 with q >= 2, d q divides `tokens`
// (> 0), `element_bytes` > 0, and `m` is a chain (each layer's n the next one's k) of
// plain linear layers (no bias, norm, activation, residual or loss around them) whose k
// and n q divides.
double summa_broadcast_peak_bytes(const model::ModelDescription& m, const topo::Grid& g, int64_t tokens,
                                  double element_bytes);

}  // namespace axonn::planner
