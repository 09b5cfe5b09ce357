// The tensor-parallel modes, one registry entry each: the name that the command lines,
// the ranking and the reports use, which grids belong to the mode, and how its --grid
// reads. It is the seam a new mode starts from (docs/architecture.md, "How a new
// strategy is added"). The planner's cost terms and the runtime's operators read a
// grid's layout (topo::TensorLayout, Grid::sequence), which the entry's grids set.
//
//   name      grids (of enumerate_grids' gx,gy,gz,gdata,ginter)          --grid
//   axonn3d   every grid in AxoNN's layout (1d's among them)               gx,gy,gz,gdata,ginter
//   1d        1,t,1,gdata,ginter with t >= 2 (Megatron's column/row)       t,gdata,ginter
//   sequence  1,1,1,gdata,ginter, each sequence group n >= 2 dividing gdata t,gdata,ginter
//   2d        1,q,q,gdata,ginter with q >= 2 in the SUMMA layout           t,gdata,ginter (t = q^2)
//   2d-broadcast  2d's grids in the 2d-broadcast layout (SUMMA's broadcasts) t,gdata,ginter (t = d q^2 with
//                                                                           --tensor-depth d)
//   2.5d      2d's grids (the depth is data parallelism)                  t,gdata,ginter (t = d q^2)
//   3d        l,l,l,gdata,ginter with l >= 2 in the 3d layout             t,gdata,ginter (t = l^3)
//
// Example:
//   const plan::TensorMode& m = plan::find_tensor_mode("2d", "axplan", "--tensor-mode");
//   std::vector<topo::Grid> out;
//   m.candidates(topo::Grid{1, 2, 2, 2, 1}, out);   // {1,2,2,2,1 in the 2d layout}
//   plan::tensor_mode_of(out[0]).name;              // "2d"
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "axonn/topology/grid.hpp"

namespace axonn::plan {

struct TensorMode {
  const char* name = "";
  const char* help = "";     // one phrase for --tensor-mode's help
  bool in_all = false;       // ranked by --tensor-mode all (1d is among axonn3d's grids; 2.5d's are 2d's)
  bool paper_model = false;  // the 4D paper's fixed model covers it (--comm-model paper)
  bool takes_depth = false;  // --tensor-depth applies (2.5d)
  std::optional<topo::GroupMode> group_grid;  // --grid t,gdata,ginter reads so; none: gx,gy,gz,gdata,ginter
  // Whether `g` is this mode's: exactly one entry owns each grid (an alias owns none).
  bool (*owns)(const topo::Grid& g) = nullptr;
  // Appends the mode's grids made from one of enumerate_grids' (its layout or sequence
  // group set), in a fixed order; nothing where `g` has the wrong shape.
  void (*candidates)(const topo::Grid& g, std::vector<topo::Grid>& out) = nullptr;
  // The mode whose candidates include all of this one's (1d: axonn3d; 2.5d: 2d), or
  // nullptr: a ranking of both lists them once.
  const char* within = nullptr;
  // The ranking's strategy column for one of its grids ("sequence 4"); nullptr: the
  // mode's name.
  std::string (*label)(const topo::Grid& g) = nullptr;
  // What names one of its grids apart from a grid of AxoNN's layout with the same five
  // fields ("2d", "seq2"; validate's configuration names put it first), or nullptr where
  // the five fields say it all (axonn3d, 1d). A ranking of modes with a tag needs the
  // strategy column.
  std::string (*tag)(const topo::Grid& g) = nullptr;
  // The layout its --grid makes where it is not group_grid's own (2d-broadcast: the
  // 2d group's grid in the 2d-broadcast layout).
  std::optional<topo::TensorLayout> grid_layout;
};

// Every mode, in the ranking's enumeration order.
const std::vector<TensorMode>& tensor_modes();
// "axonn3d, 1d, sequence, 2d, 2.5d, 3d": for messages and help.
std::string tensor_mode_list();
// The entry named `name`; throws InputError (module, where) naming the known modes.
const TensorMode& find_tensor_mode(const std::string& name, const std::string& module, const std::string& where);
// The entry that owns `g`.
const TensorMode& tensor_mode_of(const topo::Grid& g);
// Its label and its tag (empty where it has none), by the entry that owns `g`.
std::string tensor_mode_label(const topo::Grid& g);
std::string tensor_mode_tag(const topo::Grid& g);

}  // namespace axonn::plan
