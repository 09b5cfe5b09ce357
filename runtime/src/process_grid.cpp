// Communicators of the process grid; see axonn/runtime/process_grid.hpp.
#include "axonn/runtime/process_grid.hpp"

#include <initializer_list>

#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

// The members share every coordinate outside the mesh axes `names`; the color is the
// group's lowest rank (the rank with those coordinates zeroed).
std::unique_ptr<Communicator> group_over(Communicator& world, const topo::Mesh& mesh,
                                         const std::vector<std::string>& names, const std::string& name) {
  const auto color = mesh.group_root(world.rank(), names);
  return world.split(static_cast<int>(color), world.rank(), name);
}

}  // namespace

ProcessGrid::ProcessGrid(Communicator& world, const topo::Grid& grid, const topo::PlacementOrder& order)
    : world_(world), layout_(checked(world, grid), order) {
  coords_ = layout_.coords_of(world.rank());
  const topo::Mesh& mesh = layout_.mesh();
  using topo::Axis;
  auto axes_of = [&](std::initializer_list<Axis> axes) {  // grid axes as mesh axes
    std::vector<std::string> names;
    for (Axis a : axes)
      for (auto& n : topo::mesh_axes(grid, a)) names.push_back(std::move(n));
    return names;
  };
  for (int i = 0; i < topo::kNumAxes; ++i) {
    auto a = static_cast<Axis>(i);
    axis_[i] = group_over(world, mesh, axes_of({a}), topo::axis_name(a));
  }
  z_data_ = group_over(world, mesh, axes_of({Axis::Z, Axis::Data}), "z_data");
  model_ = group_over(world, mesh, axes_of({Axis::X, Axis::Y, Axis::Z, Axis::Pipe}), "model");
  tensor_ = group_over(world, mesh, axes_of({Axis::X, Axis::Y, Axis::Z}), "tensor");
  // One replica's sequence group: the mesh's "sequence" axis (a group of one without it).
  sequence_ = group_over(world, mesh, {topo::kSequenceAxis}, "sequence");
}

const topo::Grid& ProcessGrid::checked(const Communicator& world, const topo::Grid& grid) {
  if (grid.total() != world.size())
    throw InputError("runtime", "plan grid " + grid.to_string() + " has " + std::to_string(grid.total()) +
                                    " ranks but the job has " + std::to_string(world.size()),
                     "MPI world size", "mpirun -np " + std::to_string(grid.total()));
  if (auto p = topo::grid_problem(grid))
    throw InputError("runtime", p->what + " (" + grid.to_string() + ")", "plan grid", p->expected);
  return grid;
}

}  // namespace axonn::runtime
