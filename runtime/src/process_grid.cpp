// Communicators of the process grid; see axonn/runtime/process_grid.hpp.
#include "axonn/runtime/process_grid.hpp"

#include <initializer_list>

#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

// Members share every coordinate outside `axes`; color = the rank with `axes` zeroed.
std::unique_ptr<Communicator> group_over(Communicator& world, const topo::RankLayout& layout,
                                         const topo::Coords& mine, std::initializer_list<topo::Axis> axes,
                                         const std::string& name) {
  topo::Coords base = mine;
  for (auto a : axes) base[static_cast<int>(a)] = 0;
  const auto color = layout.rank_of(base);
  return world.split(static_cast<int>(color), world.rank(), name);
}

}  // namespace

ProcessGrid::ProcessGrid(Communicator& world, const topo::Grid& grid, const topo::PlacementOrder& order)
    : world_(world), layout_(grid, order) {
  if (grid.total() != world.size())
    throw InputError("runtime", "plan grid " + grid.to_string() + " has " + std::to_string(grid.total()) +
                               " ranks but the job has " + std::to_string(world.size()),
                "MPI world size", "mpirun -np " + std::to_string(grid.total()));
  coords_ = layout_.coords_of(world.rank());
  using topo::Axis;
  for (int i = 0; i < topo::kNumAxes; ++i) {
    auto a = static_cast<Axis>(i);
    axis_[i] = group_over(world, layout_, coords_, {a}, topo::axis_name(a));
  }
  z_data_ = group_over(world, layout_, coords_, {Axis::Z, Axis::Data}, "z_data");
  model_ = group_over(world, layout_, coords_, {Axis::X, Axis::Y, Axis::Z, Axis::Pipe}, "model");
  tensor_ = group_over(world, layout_, coords_, {Axis::X, Axis::Y, Axis::Z}, "tensor");
  if (grid.sequence < 1 || grid.gdata % grid.sequence != 0)
    throw InputError("runtime", "sequence group of " + std::to_string(grid.sequence) + " on " + grid.to_string(),
                     "plan grid", "a sequence group size that divides gdata");
  // The data axis's innermost `sequence` members: one replica's sequence group.
  const int64_t d = coord(Axis::Data);
  sequence_ = data().split(static_cast<int>(d / grid.sequence), static_cast<int>(d % grid.sequence), "sequence");
}

}  // namespace axonn::runtime
