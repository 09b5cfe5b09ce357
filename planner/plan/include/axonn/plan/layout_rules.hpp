// The rules of a tensor layout (topo::TensorLayout) that the planner and the runtime
// both follow, one entry per layout: which axis splits the activations' hidden columns,
// which of a layer's collectives the step's instruction list (schedule/pass.hpp) holds,
// and what a grid in the layout must divide. The schedule, divisibility, the planner's
// cost entry (planner/layout_costs.hpp) and the runtime's operators (the norm's group,
// the embedding's row scatter, rows_split_vector) read it instead of testing the layout;
// the runtime's operator entry (runtime/tensor_ops.hpp) names the axes of the rows it
// splits, which must agree with splits_rows (a runtime test checks it). A new layout
// adds one entry here beside those two (docs/architecture.md, "How a new strategy is added").
//
//   layout    hidden axis  rows split  input gathered  forward collective      dO gathered  grid
//   axonn3d   X            -           -               all-reduce over a       -            any
//   2d        Y            -           over Y          - (none)                -            gx = 1, gy = gz
//   2d-broadcast  Y        -           - (broadcast)   - (none)                -            gx = 1, gy = gz
//   3d        X            yes         over b          reduce-scatter over a   over a       no sequence group, sequences split over X x Y
// (the planner enumerates 3d on cubes, l x l x l; the rules and the runtime take any Gx, Gy, Gz)
// (a and b: the axes that split W's rows and columns, X and Y, swapped for a
// row-parallel layer where the layout has roles; docs/model.md sections 3, 15, 16.)
//
// Example:
//   const plan::LayoutRules& r = plan::layout_rules(grid.layout);
//   r.hidden_axis;                      // 2d: Axis::Y
//   r.layer_problem(layer, grid);       // "" where the layer divides
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "axonn/model/model_description.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::plan {

struct LayoutRules {
  topo::TensorLayout layout = topo::TensorLayout::Axonn3d;  // its name: topo::layout_name
  // The axis that splits the activations' hidden columns: the layer norm's group.
  topo::Axis hidden_axis = topo::Axis::X;
  // The rows AxoNN replicates are split (3d): a layer's input rows over b, its output
  // rows over a; it gathers the input's rows before its matmul and reduce-scatters the
  // output's instead of all-reducing them, so the activation between layers is also
  // split over Y.
  bool splits_rows = false;
  // The instructions of a weighted layer (not an embedding's input): an InputGather
  // before its forward, a ForwardCollective after it, an OutputGradGather before its
  // backward.
  bool gathers_input = false;
  bool forward_collective = true;
  bool gathers_output_grad = false;
  // The layout's requirements on the grid's shape (sequence group included), checked
  // before the batch's; nullopt where it has none.
  std::optional<std::string> (*shape_problem)(const topo::Grid& g) = nullptr;
  // Its requirement on a micro-batch's sequences beyond microbatch_seqs % gz == 0;
  // nullptr where it has none.
  std::optional<std::string> (*microbatch_problem)(const topo::Grid& g, int64_t microbatch_seqs) = nullptr;
  // Whether a layer's weight (and attention heads) split on `g`, and the problem in
  // words where not ("" where it divides; the caller prefixes the layer's name).
  bool (*layer_divides)(const model::Layer& l, const topo::Grid& g) = nullptr;
  std::string (*layer_problem)(const model::Layer& l, const topo::Grid& g) = nullptr;
  // A linear layer's weight stays this rank's own block (2d-broadcast): the pass has no
  // Prefetch, Fetch or ReduceScatter for it; its forward and backward computes move the
  // blocks (SUMMA's broadcasts and reduces, runtime/summa.hpp), and its dW arrives
  // already summed over Z, ready for the data-parallel bucket. Embeddings are gathered
  // and reduce-scattered over Z as in 2d.
  bool linear_weight_local = false;
};

// The entry of `layout`.
const LayoutRules& layout_rules(topo::TensorLayout layout);

// "what=a is not divisible by by=b": the divisibility messages' one wording.
std::string not_divisible(const std::string& what, int64_t a, const std::string& by, int64_t b);

}  // namespace axonn::plan
