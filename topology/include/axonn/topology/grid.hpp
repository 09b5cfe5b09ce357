// The 5D process grid (Gx, Gy, Gz, Ginter, Gdata), the cost models' view of a job's
// ranks, and its rank layout: the grid as a named mesh (axonn/topology/mesh.hpp, whose
// rank layout is the one function that maps a rank to coordinates), shared by the
// planner (which models where each group lands) and the runtime (which builds the
// communicators).
//
// The placement order lists the axes innermost first. With the default
// order (x, y, z, pipe, data):
//     rank = x + Gx*(y + Gy*(z + Gz*(pipe + Ginter*data)))
// so consecutive ranks share an X group; ranks fill nodes in order
// (node = rank / gpus_per_node). The mesh names the axes the same way; a grid with a
// sequence group splits its data axis into two mesh axes, "sequence" (the innermost
// `sequence` members: one replica's sequence group) placed right inside "data" (the
// replicas).
//
// Example (8 ranks, Gx=2, Gy=2, Gz=2):
//   RankLayout L(Grid{2, 2, 2, 1, 1}, default_order());
//   L.group_ranks(0, Axis::X);   // {0, 1}
//   L.group_ranks(0, Axis::Y);   // {0, 2}
//   L.group_ranks(5, Axis::Z);   // {1, 5}
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "axonn/topology/mesh.hpp"

namespace axonn::topo {

enum class Axis : int { X = 0, Y = 1, Z = 2, Pipe = 3, Data = 4 };
inline constexpr int kNumAxes = 5;

const char* axis_name(Axis a);  // "x", "y", "z", "pipe", "data"
// Throws axonn::Error (module `module`, location `where`) for an unknown name.
Axis parse_axis(const std::string& name, const std::string& module, const std::string& where);

// The layout of the tensor-parallel weights and activations:
//  - Axonn3d: AxoNN's 3D (the 4D paper): W's blocks over X and Y (chunks over Z),
//    activations replicated over the axis that splits W's other dimension.
//  - TwoD: Colossal-AI's 2D (the `2d` tensor mode, SUMMA's layout) on the Y x Z plane
//    of a q x q tensor group: gx = 1, gy = gz = q. Every weight is block (z, y) of its
//    matrix (k block z, n block y), every activation block (z, y) of its matrix (the
//    rows of Z-rank z's sequences, hidden block y): nothing is replicated in the
//    tensor group, and every layer is a normal (non-transposed) one.
//  - TwoDBroadcast: the same blocks, with SUMMA run as the paper states it (the
//    `2d-broadcast` tensor mode, runtime/summa.hpp): a linear layer broadcasts its
//    input's blocks along Y and its weight's blocks along Z, q steps each, instead of
//    gathering them; a rank never holds more than its own block of a linear weight.
//  - ThreeD: Colossal-AI's 3D (the `3d` tensor mode): AxoNN's blocks of W, and every
//    activation also split by rows (whole sequences) over the axis AxoNN replicates it
//    over, so nothing is replicated: a layer all-gathers its input's rows before its
//    matmul and reduce-scatters its output's rows instead of all-reducing them.
enum class TensorLayout : uint8_t { Axonn3d, TwoD, ThreeD, TwoDBroadcast };

struct Grid {
  int64_t gx = 1, gy = 1, gz = 1, gdata = 1, ginter = 1;
  // Sequence parallelism (the `sequence` tensor mode, runtime/ring_attention.hpp): the
  // innermost `sequence` members of the data axis split each sequence of their replica
  // into contiguous chunks instead of taking sequences of their own. 1: none. Divides gdata.
  int64_t sequence = 1;
  TensorLayout layout = TensorLayout::Axonn3d;  // the tensor mode's (above)
  // SUMMA's blocks, in either form (2d, 2d-broadcast).
  bool summa() const { return layout == TensorLayout::TwoD || layout == TensorLayout::TwoDBroadcast; }
  bool threed() const { return layout == TensorLayout::ThreeD; }

  int64_t size(Axis a) const;
  int64_t total() const { return gx * gy * gz * gdata * ginter; }
  // Model replicas over the data axis, each fed its own sequences: gdata / sequence.
  int64_t replicas() const { return gdata / sequence; }
  std::string to_string() const;  // "gx=2 gy=4 gz=1 gdata=4 ginter=1" (+ " sequence=2", " 2d", " 2d-broadcast", " 3d")
  bool operator==(const Grid& o) const {
    return gx == o.gx && gy == o.gy && gz == o.gz && gdata == o.gdata && ginter == o.ginter && sequence == o.sequence &&
           layout == o.layout;
  }
};

// A grid's first broken rule, or nullopt: a sequence group must divide gdata; the 2d
// layout needs gx = 1, gy = gz; neither 2d nor 3d takes a sequence group. `field` is
// the grid's JSON field at fault ("sequence", "layout").
struct GridProblem {
  std::string field, what, expected;
};
std::optional<GridProblem> grid_problem(const Grid& g);

// The tensor layout's name in plans and reports: "axonn3d", "2d", "3d".
const char* layout_name(TensorLayout l);
// Throws InputError (module, where) for any other name.
TensorLayout parse_layout(const std::string& name, const std::string& module, const std::string& where);

using PlacementOrder = std::array<Axis, kNumAxes>;  // innermost first
PlacementOrder default_order();                     // x, y, z, pipe, data
std::string order_to_string(const PlacementOrder& o);  // "x,y,z,pipe,data"
// Parses "x,y,z,pipe,data" (each axis exactly once); throws InputError otherwise.
PlacementOrder parse_order(const std::string& text, const std::string& module,
                           const std::string& where);

// The one grid parser of the command lines: "gx,gy,gz,gdata,ginter" (five positive
// integers), or "gx,gy,gz,gdata" with ginter = 1. Throws InputError (module `module`,
// location `where`, e.g. "--grid 2,2") otherwise.
Grid parse_grid(const std::string& text, const std::string& module, const std::string& where);
// The grid of a mode with one group, "t,gdata,ginter" (or "t,gdata"):
//  - Sequence: gdata replicas, each splitting its sequences over t ranks: the grid
//    1,1,1,t*gdata,ginter with sequence t;
//  - OneD: Megatron's 1D tensor parallelism over t ranks: the grid 1,t,1,gdata,ginter
//    (column-parallel normal layers, row-parallel transposed ones);
//  - TwoD: Colossal-AI's 2D over t = q^2 ranks (t a square): the grid 1,q,q,gdata,ginter
//    with summa set. With `depth` d > 1, Tesseract's 2.5D over t = d q^2 ranks: the grid
//    1,q,q,d*gdata,ginter. Its depth is data parallelism of the 2D layers (W replicated
//    over the d layers, X's rows split over them, dW reduced over them), so the depth is
//    a factor of the data axis (docs/model.md section 15).
//  - ThreeD: Colossal-AI's 3D over t = l^3 ranks (t a cube): the grid l,l,l,gdata,ginter
//    in the 3d layout.
enum class GroupMode { Sequence, OneD, TwoD, ThreeD };
// The integer r >= 1 with r^k = n (2d's q for k = 2, 3d's l for k = 3), or 0 if none.
int64_t exact_root(int64_t n, int k);
Grid parse_group_grid(GroupMode mode, const std::string& text, const std::string& module, const std::string& where,
                      int64_t depth = 1);

// The mesh axes of a grid in a placement order: x, y, z, pipe, data in that order, each
// with its size (1 included), the data axis split into "sequence" and "data" where the
// grid has a sequence group. The mesh's name for the sequence group's axis:
inline constexpr const char* kSequenceAxis = "sequence";
Mesh grid_mesh(const Grid& g, const PlacementOrder& order);
// The mesh axes that make up grid axis `a` ("sequence" and "data" for the data axis of
// a grid with a sequence group, the axis's own name otherwise).
std::vector<std::string> mesh_axes(const Grid& g, Axis a);
// The inverse of grid_mesh, for a mesh read from a file: InputError (module, where)
// unless the mesh holds x, y, z, pipe and data once each, plus at most "sequence" placed
// right inside "data", and the grid it makes in `layout` has no grid_problem. A
// "sequence" axis of size 1 is no sequence group (grid_mesh leaves it out).
struct GridPlacement {
  Grid grid;
  PlacementOrder order;
};
GridPlacement grid_of_mesh(const Mesh& m, TensorLayout layout, const std::string& module, const std::string& where);

using Coords = std::array<int64_t, kNumAxes>;  // indexed by Axis

class RankLayout {
 public:
  RankLayout(const Grid& grid, const PlacementOrder& order);

  const Grid& grid() const { return grid_; }
  const PlacementOrder& order() const { return order_; }
  const Mesh& mesh() const { return mesh_; }  // grid_mesh(grid, order): the layout itself

  int64_t stride(Axis a) const { return stride_[static_cast<int>(a)]; }
  // Number of ranks between consecutive members of a group on axis `a` = the
  // product of the sizes of the axes placed inside it (the "ip" of eq. 10).
  int64_t inner_size(Axis a) const { return stride(a); }

  // The mesh's layout in grid coordinates (a data coordinate d is the mesh's sequence
  // coordinate d % sequence and data coordinate d / sequence).
  int64_t rank_of(const Coords& c) const;
  Coords coords_of(int64_t rank) const;
  // Ranks of the group along `a` that contains `rank`, ordered by coordinate.
  std::vector<int64_t> group_ranks(int64_t rank, Axis a) const;

 private:
  Grid grid_;
  PlacementOrder order_;
  Mesh mesh_;
  std::vector<int> grid_axis_;  // of each mesh axis: its topo::Axis, -1 for "sequence"
  std::array<int64_t, kNumAxes> stride_{};
};

}  // namespace axonn::topo
