// The tensor-mode registry; see axonn/plan/tensor_mode.hpp.
#include "axonn/plan/tensor_mode.hpp"

#include <string>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"

namespace axonn::plan {
namespace {

using topo::Grid;
using topo::TensorLayout;

bool axonn_layout(const Grid& g) { return g.layout == TensorLayout::Axonn3d && g.sequence == 1; }
bool is_1d(const Grid& g) { return axonn_layout(g) && g.gx == 1 && g.gz == 1 && g.gy > 1; }

void axonn3d_grids(const Grid& g, std::vector<Grid>& out) { out.push_back(g); }
void one_d_grids(const Grid& g, std::vector<Grid>& out) {
  if (is_1d(g)) out.push_back(g);
}
void sequence_grids(const Grid& g, std::vector<Grid>& out) {
  if (g.gx * g.gy * g.gz != 1) return;
  for (int64_t n = 2; n <= g.gdata; ++n)
    if (g.gdata % n == 0) {
      Grid s = g;
      s.sequence = n;
      out.push_back(s);
    }
}
// The q x q grids on Y x Z (SUMMA's), in `layout` (either form).
void summa_grids(const Grid& g, TensorLayout layout, std::vector<Grid>& out) {
  if (g.gx != 1 || g.gy != g.gz || g.gy < 2) return;
  Grid s = g;
  s.layout = layout;
  out.push_back(s);
}
void two_d_grids(const Grid& g, std::vector<Grid>& out) { summa_grids(g, TensorLayout::TwoD, out); }
void two_d_broadcast_grids(const Grid& g, std::vector<Grid>& out) { summa_grids(g, TensorLayout::TwoDBroadcast, out); }
void three_d_grids(const Grid& g, std::vector<Grid>& out) {
  if (g.gx != g.gy || g.gy != g.gz || g.gx < 2) return;
  Grid s = g;
  s.layout = TensorLayout::ThreeD;
  out.push_back(s);
}

std::string axonn3d_label(const Grid&) { return strategy_name(Strategy::FourD); }
std::string sequence_label(const Grid& g) { return "sequence " + std::to_string(g.sequence); }
std::string sequence_tag(const Grid& g) { return "seq" + std::to_string(g.sequence); }
std::string two_d_tag(const Grid&) { return "2d"; }
std::string two_d_broadcast_tag(const Grid&) { return "2db"; }
std::string three_d_tag(const Grid&) { return "3d"; }

}  // namespace

const std::vector<TensorMode>& tensor_modes() {
  using topo::GroupMode;
  static const std::vector<TensorMode> modes = {
      {"axonn3d", "AxoNN's 3D, gx,gy,gz", true, true, false, std::nullopt,
       [](const Grid& g) { return axonn_layout(g) && !is_1d(g); }, axonn3d_grids, nullptr, axonn3d_label, nullptr, std::nullopt},
      {"1d", "Megatron's column/row pairs: AxoNN's 3D on 1,t,1 with t >= 2; --grid t,gdata,ginter", false, true, false,
       GroupMode::OneD, is_1d, one_d_grids, "axonn3d", nullptr, nullptr, std::nullopt},
      {"sequence",
       "ring self-attention, Colossal-AI: the sequence split over a group of the data axis; --grid t,gdata,ginter",
       true, false, false, GroupMode::Sequence, [](const Grid& g) { return g.sequence > 1; }, sequence_grids, nullptr,
       sequence_label, sequence_tag, std::nullopt},
      {"2d",
       "Colossal-AI's 2D, SUMMA on a q x q grid in collective form (one all-gather of the input over Y, the "
       "weight's over Z): --grid t,gdata,ginter with t = q^2",
       true, false, false, GroupMode::TwoD,
       [](const Grid& g) { return g.layout == TensorLayout::TwoD && g.sequence == 1; }, two_d_grids, nullptr, nullptr,
       two_d_tag, std::nullopt},
      {"2d-broadcast",
       "Colossal-AI's 2D as the paper runs SUMMA: q steps of block broadcasts along rows and columns, no weight "
       "gathered; --grid t,gdata,ginter with t = q^2 (--tensor-depth d: 2.5d's layers)",
       true, false, true, GroupMode::TwoD, [](const Grid& g) { return g.layout == TensorLayout::TwoDBroadcast; },
       two_d_broadcast_grids, nullptr, nullptr, two_d_broadcast_tag, TensorLayout::TwoDBroadcast},
      {"2.5d",
       "Tesseract: 2d on each of --tensor-depth d layers, which is 2d with d-way data parallelism; --grid "
       "t,gdata,ginter with t = d q^2",
       false, false, true, GroupMode::TwoD, [](const Grid&) { return false; }, two_d_grids, "2d", nullptr, two_d_tag, std::nullopt},
      {"3d", "Colossal-AI's 3D: AxoNN's 3D with no activation replicated; --grid t,gdata,ginter with t = l^3", true,
       false, false, GroupMode::ThreeD, [](const Grid& g) { return g.threed() && g.sequence == 1; }, three_d_grids,
       nullptr, nullptr, three_d_tag, std::nullopt},
  };
  return modes;
}

std::string tensor_mode_list() {
  std::string s;
  for (const auto& m : tensor_modes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

const TensorMode& find_tensor_mode(const std::string& name, const std::string& module, const std::string& where) {
  for (const auto& m : tensor_modes())
    if (name == m.name) return m;
  throw InputError(module, "tensor mode '" + name + "'", where, "one of " + tensor_mode_list());
}

const TensorMode& tensor_mode_of(const topo::Grid& g) {
  for (const auto& m : tensor_modes())
    if (m.owns(g)) return m;
  throw InternalError("plan", "a grid no tensor mode owns", g.to_string(), "a grid of one registered mode");
}

std::string tensor_mode_label(const topo::Grid& g) {
  const TensorMode& m = tensor_mode_of(g);
  return m.label ? m.label(g) : m.name;
}

std::string tensor_mode_tag(const topo::Grid& g) {
  const TensorMode& m = tensor_mode_of(g);
  return m.tag ? m.tag(g) : "";
}

}  // namespace axonn::plan
