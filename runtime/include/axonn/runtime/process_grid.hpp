// The process grid of a plan as communicators: one per axis (X, Y, Z, data, pipe)
// plus the combinations the runtime reduces over, each the group over some axes of the
// grid's named mesh (topo::RankLayout::mesh(): the sequence group is its "sequence"
// axis). Built from the same rank layout the planner models, so a group lands where the
// planner assumed.
//
// Example (8 ranks, grid 2 x 2 x 2):
//   ProcessGrid g(*world, topo::Grid{2, 2, 2, 1, 1}, topo::default_order());
//   g.x().size();          // 2: this rank and its X neighbour
//   g.coord(topo::Axis::Y);
#pragma once

#include <memory>

#include "axonn/runtime/communicator.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::runtime {

class ProcessGrid {
 public:
  // Refuses (axonn::InputError) a grid whose product differs from world.size(), or a
  // broken one (topo::grid_problem).
  ProcessGrid(Communicator& world, const topo::Grid& grid, const topo::PlacementOrder& order);

  const topo::Grid& grid() const { return layout_.grid(); }
  const topo::RankLayout& layout() const { return layout_; }
  int64_t coord(topo::Axis a) const { return coords_[static_cast<int>(a)]; }

  Communicator& world() { return world_; }
  Communicator& x() { return *axis_[0]; }
  Communicator& y() { return *axis_[1]; }
  Communicator& z() { return *axis_[2]; }
  Communicator& pipe() { return *axis_[3]; }
  Communicator& data() { return *axis_[4]; }
  Communicator& axis(topo::Axis a) { return *axis_[static_cast<int>(a)]; }
  // Ranks that differ only in Z and data: parameters replicated over Z reduce here.
  Communicator& z_data() { return *z_data_; }
  // Ranks that hold different parts of one model replica (X, Y, Z, pipe).
  Communicator& model() { return *model_; }
  // Ranks that hold different parts of one pipeline stage of a replica (X, Y, Z).
  Communicator& tensor() { return *tensor_; }
  // The members of the data axis that split one replica's sequences (Grid::sequence; a
  // group of one without sequence parallelism).
  Communicator& sequence() { return *sequence_; }

 private:
  static const topo::Grid& checked(const Communicator& world, const topo::Grid& grid);

  Communicator& world_;
  topo::RankLayout layout_;
  topo::Coords coords_{};
  std::unique_ptr<Communicator> axis_[topo::kNumAxes];
  std::unique_ptr<Communicator> z_data_, model_, tensor_, sequence_;
};

}  // namespace axonn::runtime
