// The planner side of a tensor layout (topo::TensorLayout): how the cost model splits a
// layer's weight, its activations and its collectives, one entry per layout, looked up
// once per grid. layer_comm, compute_model, memory_model and the evaluator read the
// entry instead of testing the layout, so a new layout is a new entry: its collectives
// function and its properties (docs/architecture.md, "How a new strategy is added").
// What the runtime follows too (the hidden axis, the split rows, the instructions,
// divisibility) is the layout's shared entry, plan/layout_rules.hpp, which this one
// points to. The runtime's twin is runtime/tensor_ops.hpp; plan/tensor_mode.hpp names
// the modes whose grids carry each layout.
//
//   layout    roles  input gathered  rows split  large collectives of a layer, one micro-batch
//   axonn3d   yes    -               -           AG/RS of W over Z; AR of the output over a, of dI over b
//   2d        no     over Y          -           AG/RS of W over Z; AG of the input and RS of dI over Y
//   3d        yes    -               yes         AG/RS of W over Z; AG of the input and RS of dI over b,
//                                                RS of the output and AG of dO over a
//   2d-broadcast no  - (broadcast)   -           SUMMA's q steps: broadcasts of the input block along Y and
//                                                of the weight block along Z, reduces of dI and dW; the
//                                                embedding as 2d
//   sequence  (axonn3d's, no tensor axes)         the attention's ring: K and V shifted round
//                                                the sequence group, forward and backward
// (a splits W's rows, b its columns: X and Y, swapped for a row-parallel layer where the
// layout has roles; docs/model.md sections 3, 15 and 16.)
//
// Example:
//   const planner::LayoutCosts& costs = planner::layout_costs(grid);
//   costs.activation_shards(grid);   // 2d on 1,2,2: the hidden columns over Y = 2
#pragma once

#include <cstdint>
#include <optional>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::planner {

struct LayerCommSettings;
struct LayerCollectives;

struct LayoutCosts {
  const plan::LayoutRules* rules = nullptr;  // the layout's shared entry (never null)
  // Row-parallel layers (and embeddings) swap X and Y (Layer::swaps_xy); false: every
  // layer is a normal one (2d).
  bool roles = true;
  // The axis over which a layer gathers its input's columns before the matmul (2d: Y,
  // each rank holding a block k/Gy of them, its norm working on that block); none where
  // the input arrives in the matmul's split.
  std::optional<topo::Axis> input_gathered_over;
  // The large collectives of a linear layer or an embedding for one micro-batch, into
  // `c` (its axes a and b set): docs/model.md section 3 (axonn3d), 15 (2d), 16 (3d).
  void (*collectives)(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                      const LayerCommSettings& s, LayerCollectives& c) = nullptr;
  // The attention core's collectives for one micro-batch, into `c`: none where each rank
  // holds whole sequences (nullptr); the ring self-attention's shifts in the sequence
  // mode (docs/model.md section 13).
  void (*attention)(const model::Layer& l, const topo::Grid& g, const LayerCommSettings& s,
                    LayerCollectives& c) = nullptr;

  // Whether a layer swaps X and Y in this layout.
  bool swaps(const model::Layer& l) const { return roles && l.swaps_xy(); }
  // The parts a Z-rank's rows are split into where the layout splits rows (3d; 1
  // elsewhere): a layer's input over b, its output over a (X and Y, swapped where the
  // layer swaps), and attention's, which is QKV's output, over X.
  int64_t input_row_split(const model::Layer& l, const topo::Grid& g) const {
    return rules->splits_rows ? g.size(swaps(l) ? topo::Axis::X : topo::Axis::Y) : 1;
  }
  int64_t output_row_split(const model::Layer& l, const topo::Grid& g) const {
    return rules->splits_rows ? g.size(swaps(l) ? topo::Axis::Y : topo::Axis::X) : 1;
  }
  int64_t attention_row_split(const topo::Grid& g) const { return rules->splits_rows ? g.gx : 1; }
  // The pieces each row of the activation between layers is split into on one Z-rank:
  // its hidden columns over the hidden axis, and over Y too where rows are split.
  int64_t activation_shards(const topo::Grid& g) const {
    return g.size(rules->hidden_axis) * (rules->splits_rows ? g.gy : 1);
  }
  // The blocks a layer's input columns are held in before its gather, its norm working
  // on one (2d: Gy; else 1).
  int64_t input_block_split(const topo::Grid& g) const {
    return input_gathered_over ? g.size(*input_gathered_over) : 1;
  }
};

// The entry of `layout`.
const LayoutCosts& layout_costs(topo::TensorLayout layout);
// The entry of a grid: its layout's, or with a sequence group (Grid::sequence > 1, the
// sequence mode, AxoNN's layout without tensor axes) the sequence entry, AxoNN's with the
// ring self-attention.
const LayoutCosts& layout_costs(const topo::Grid& g);

}  // namespace axonn::planner
