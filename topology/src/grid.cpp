// The process grid and rank layout; see axonn/topology/grid.hpp.
#include "axonn/topology/grid.hpp"

#include <sstream>

#include "axonn/common/error.hpp"

namespace axonn::topo {

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::X: return "x";
    case Axis::Y: return "y";
    case Axis::Z: return "z";
    case Axis::Pipe: return "pipe";
    case Axis::Data: return "data";
  }
  return "?";
}

Axis parse_axis(const std::string& name, const std::string& module, const std::string& where) {
  for (int i = 0; i < kNumAxes; ++i)
    if (name == axis_name(static_cast<Axis>(i))) return static_cast<Axis>(i);
  throw InputError(module, "unknown axis \"" + name + "\"", where, "one of x, y, z, pipe, data");
}

int64_t Grid::size(Axis a) const {
  switch (a) {
    case Axis::X: return gx;
    case Axis::Y: return gy;
    case Axis::Z: return gz;
    case Axis::Pipe: return ginter;
    case Axis::Data: return gdata;
  }
  return 1;
}

std::string Grid::to_string() const {
  std::ostringstream s;
  s << "gx=" << gx << " gy=" << gy << " gz=" << gz << " gdata=" << gdata << " ginter=" << ginter;
  if (sequence != 1) s << " sequence=" << sequence;
  if (layout != TensorLayout::Axonn3d) s << " " << layout_name(layout);
  return s.str();
}

std::optional<GridProblem> grid_problem(const Grid& g) {
  if (g.sequence < 1 || g.gdata % g.sequence != 0)
    return GridProblem{"sequence",
                       "sequence group of " + std::to_string(g.sequence) + " does not divide gdata = " +
                           std::to_string(g.gdata),
                       "a divisor of gdata (the sequence group is the data axis's innermost members)"};
  if (g.summa() && (g.gx != 1 || g.gy != g.gz))
    return GridProblem{"layout",
                       std::string("the ") + layout_name(g.layout) + " layout on gx=" + std::to_string(g.gx) + " gy=" + std::to_string(g.gy) +
                           " gz=" + std::to_string(g.gz),
                       "gx = 1 and gy = gz (a q x q grid on Y x Z)"};
  if (g.layout != TensorLayout::Axonn3d && g.sequence != 1)
    return GridProblem{"layout", std::string("the ") + layout_name(g.layout) + " layout with a sequence group",
                       std::string("no sequence group with ") + layout_name(g.layout)};
  return std::nullopt;
}

const char* layout_name(TensorLayout l) {
  switch (l) {
    case TensorLayout::Axonn3d: return "axonn3d";
    case TensorLayout::TwoD: return "2d";
    case TensorLayout::ThreeD: return "3d";
    case TensorLayout::TwoDBroadcast: return "2d-broadcast";
  }
  return "?";
}

TensorLayout parse_layout(const std::string& name, const std::string& module, const std::string& where) {
  for (auto l : {TensorLayout::Axonn3d, TensorLayout::TwoD, TensorLayout::ThreeD, TensorLayout::TwoDBroadcast})
    if (name == layout_name(l)) return l;
  throw InputError(module, "unknown tensor layout \"" + name + "\"", where, "one of axonn3d, 2d, 3d, 2d-broadcast");
}

namespace {

// Comma-separated positive integers; InputError naming the bad one otherwise.
std::vector<int64_t> positive_list(const std::string& text, const std::string& module, const std::string& where,
                                   const std::string& expected) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      const long long x = std::stoll(item, &used);
      if (used != item.size() || x < 1) throw std::invalid_argument(item);
      v.push_back(x);
    } catch (const std::exception&) {
      throw InputError(module, "bad grid value \"" + item + "\"", where, expected);
    }
  }
  return v;
}

}  // namespace

Grid parse_grid(const std::string& text, const std::string& module, const std::string& where) {
  const std::string expected = "gx,gy,gz,gdata,ginter (or gx,gy,gz,gdata with ginter = 1): positive integers";
  std::vector<int64_t> v = positive_list(text, module, where, expected);
  if (v.size() == 4) v.push_back(1);
  if (v.size() != 5) throw InputError(module, "grid needs 4 or 5 values", where, expected);
  return Grid{v[0], v[1], v[2], v[3], v[4]};
}

int64_t exact_root(int64_t n, int k) {
  auto power = [k](int64_t r) {
    int64_t p = 1;
    for (int i = 0; i < k; ++i) p *= r;
    return p;
  };
  int64_t r = 1;
  while (power(r) < n) ++r;  // n is a rank count (at most 2^40): r stays small for k >= 2
  return power(r) == n ? r : 0;
}

Grid parse_group_grid(GroupMode mode, const std::string& text, const std::string& module, const std::string& where,
                      int64_t depth) {
  const char* group = mode == GroupMode::Sequence ? "the sequence group" : "the tensor group";
  const std::string expected = std::string("t,gdata,ginter (or t,gdata with ginter = 1; t = ") + group + "): positive integers";
  std::vector<int64_t> v = positive_list(text, module, where, expected);
  if (v.size() == 2) v.push_back(1);
  if (v.size() != 3) throw InputError(module, "grid of t,gdata,ginter needs 2 or 3 values", where, expected);
  Grid g;
  g.ginter = v[2];
  if (mode == GroupMode::Sequence) {
    g.sequence = v[0];
    g.gdata = v[0] * v[1];
  } else if (mode == GroupMode::ThreeD) {
    const int64_t l = exact_root(v[0], 3);
    if (l == 0)
      throw InputError(module, "the 3d tensor group of " + std::to_string(v[0]) + " ranks is not a cube", where,
                       "t = l^3 ranks (an l x l x l grid: 1, 8, 27, 64, ...)");
    g.gx = g.gy = g.gz = l;
    g.layout = TensorLayout::ThreeD;
    g.gdata = v[1];
  } else if (mode == GroupMode::TwoD) {
    if (depth < 1 || v[0] % depth != 0)
      throw InputError(module, "the tensor group of " + std::to_string(v[0]) + " ranks at depth " + std::to_string(depth),
                       where, "t = depth x q^2 ranks");
    const int64_t layer = v[0] / depth;
    const int64_t q = exact_root(layer, 2);
    if (q == 0)
      throw InputError(module, "the 2d tensor group of " + std::to_string(layer) + " ranks" +
                                   (depth > 1 ? " per depth layer" : "") + " is not a square",
                       where, "t = depth x q^2 ranks (a q x q grid per layer: q^2 = 1, 4, 9, 16, ...)");
    g.gy = g.gz = q;
    g.layout = topo::TensorLayout::TwoD;
    g.gdata = depth * v[1];
  } else {
    g.gy = v[0];
    g.gdata = v[1];
  }
  return g;
}

PlacementOrder default_order() { return {Axis::X, Axis::Y, Axis::Z, Axis::Pipe, Axis::Data}; }

std::string order_to_string(const PlacementOrder& o) {
  std::string s;
  for (Axis a : o) s += (s.empty() ? "" : ",") + std::string(axis_name(a));
  return s;
}

PlacementOrder parse_order(const std::string& text, const std::string& module,
                           const std::string& where) {
  PlacementOrder order{};
  std::array<bool, kNumAxes> seen{};
  std::stringstream ss(text);
  std::string item;
  int n = 0;
  const std::string expected = "each of x, y, z, pipe, data exactly once, comma-separated";
  while (std::getline(ss, item, ',')) {
    if (n >= kNumAxes) throw InputError(module, "too many axes in \"" + text + "\"", where, expected);
    Axis a = parse_axis(item, module, where);
    if (seen[static_cast<int>(a)])
      throw InputError(module, "axis \"" + item + "\" repeated in \"" + text + "\"", where, expected);
    seen[static_cast<int>(a)] = true;
    order[n++] = a;
  }
  if (n != kNumAxes) throw InputError(module, "too few axes in \"" + text + "\"", where, expected);
  return order;
}

Mesh grid_mesh(const Grid& g, const PlacementOrder& order) {
  AXONN_ASSERT(g.sequence >= 1 && g.gdata % g.sequence == 0);  // readers check grid_problem
  std::vector<MeshAxis> axes;
  axes.reserve(kNumAxes + 1);
  for (Axis a : order) {
    if (a == Axis::Data && g.sequence != 1) {
      axes.push_back({kSequenceAxis, g.sequence});
      axes.push_back({axis_name(a), g.replicas()});
    } else {
      axes.push_back({axis_name(a), g.size(a)});
    }
  }
  return Mesh(std::move(axes));
}

std::vector<std::string> mesh_axes(const Grid& g, Axis a) {
  if (a == Axis::Data && g.sequence != 1) return {kSequenceAxis, axis_name(a)};
  return {axis_name(a)};
}

GridPlacement grid_of_mesh(const Mesh& m, TensorLayout layout, const std::string& module, const std::string& where) {
  const std::string expected =
      "the axes x, y, z, pipe and data once each (innermost first), and optionally \"sequence\" placed right "
      "inside \"data\"";
  GridPlacement out;
  out.grid.layout = layout;
  int n = 0;
  for (const auto& a : m.axes()) {
    if (a.name == kSequenceAxis) {
      const int i = m.index(a.name);
      if (i + 1 >= static_cast<int>(m.axes().size()) || m.axes()[i + 1].name != axis_name(Axis::Data))
        throw InputError(module, "the mesh " + m.to_string() + " does not place \"sequence\" right inside \"data\"",
                         where, expected);
      out.grid.sequence = a.size;
      continue;
    }
    int known = -1;
    for (int i = 0; i < kNumAxes; ++i)
      if (a.name == axis_name(static_cast<Axis>(i))) known = i;
    if (known < 0) throw InputError(module, "unknown mesh axis \"" + a.name + "\"", where, expected);
    const auto axis = static_cast<Axis>(known);  // each name at most once: mesh_problem
    out.order[n++] = axis;
    switch (axis) {
      case Axis::X: out.grid.gx = a.size; break;
      case Axis::Y: out.grid.gy = a.size; break;
      case Axis::Z: out.grid.gz = a.size; break;
      case Axis::Pipe: out.grid.ginter = a.size; break;
      case Axis::Data: out.grid.gdata = a.size; break;
    }
  }
  if (n != kNumAxes) {
    std::string missing;
    for (int i = 0; i < kNumAxes; ++i)
      if (!m.has(axis_name(static_cast<Axis>(i)))) missing += (missing.empty() ? "" : ", ") + std::string(axis_name(static_cast<Axis>(i)));
    throw InputError(module, "the mesh " + m.to_string() + " lacks the axes " + missing, where, expected);
  }
  out.grid.gdata *= out.grid.sequence;  // the grid's data axis counts the sequence members
  if (auto p = grid_problem(out.grid))
    throw InputError(module, "the mesh " + m.to_string() + ": " + p->what, where, p->expected);
  return out;
}

RankLayout::RankLayout(const Grid& grid, const PlacementOrder& order)
    : grid_(grid), order_(order), mesh_(grid_mesh(grid, order)) {
  // A grid axis's stride is its innermost mesh axis's: "sequence" for a split data axis.
  int64_t s = 1;
  for (const auto& a : mesh_.axes()) {
    const bool sequence = a.name == kSequenceAxis;
    const Axis g = sequence ? Axis::Data : parse_axis(a.name, "topology", "rank layout");
    grid_axis_.push_back(sequence ? -1 : static_cast<int>(g));
    if (sequence || !(g == Axis::Data && grid_.sequence != 1)) stride_[static_cast<int>(g)] = s;
    s *= a.size;
  }
}

int64_t RankLayout::rank_of(const Coords& c) const {
  std::vector<int64_t> mc(grid_axis_.size());
  for (size_t i = 0; i < mc.size(); ++i) {
    if (grid_axis_[i] < 0) {  // the sequence members: the data coordinate's remainder
      mc[i] = c[static_cast<int>(Axis::Data)] % grid_.sequence;
      continue;
    }
    const auto a = static_cast<Axis>(grid_axis_[i]);
    AXONN_ASSERT(c[grid_axis_[i]] >= 0 && c[grid_axis_[i]] < grid_.size(a));
    mc[i] = a == Axis::Data ? c[grid_axis_[i]] / grid_.sequence : c[grid_axis_[i]];
  }
  return mesh_.rank_of(mc);
}

Coords RankLayout::coords_of(int64_t rank) const {
  const std::vector<int64_t> mc = mesh_.coords_of(rank);
  Coords c{};
  for (size_t i = 0; i < mc.size(); ++i) {
    if (grid_axis_[i] < 0) {
      c[static_cast<int>(Axis::Data)] += mc[i];
      continue;
    }
    const auto a = static_cast<Axis>(grid_axis_[i]);
    c[grid_axis_[i]] += a == Axis::Data ? mc[i] * grid_.sequence : mc[i];
  }
  return c;
}

std::vector<int64_t> RankLayout::group_ranks(int64_t rank, Axis a) const {
  // One mesh axis, or "sequence" right inside "data": increasing rank is increasing coordinate.
  return mesh_.group_ranks(rank, mesh_axes(grid_, a));
}

}  // namespace axonn::topo
