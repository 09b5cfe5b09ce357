// The rules of each tensor layout; see axonn/plan/layout_rules.hpp.
#include "axonn/plan/layout_rules.hpp"

#include <array>

#include "axonn/common/error.hpp"

namespace axonn::plan {
namespace {

using model::Layer;
using model::LayerKind;
using topo::Grid;

// Attention heads split over QKV's output group, Y, in every layout.
bool heads_divide(const Layer& l, const Grid& g) { return l.heads % g.gy == 0; }
std::string heads_problem(const Layer& l, const Grid& g) { return not_divisible("heads", l.heads, "gy", g.gy); }

// AxoNN's blocks (axonn3d and 3d): W's k over a, n over b, the local block over Z.
bool axonn_divides(const Layer& l, const Grid& g) {
  if (l.kind == LayerKind::Attention) return heads_divide(l, g);
  const int64_t gk = l.swaps_xy() ? g.gy : g.gx, gn = l.swaps_xy() ? g.gx : g.gy;
  return l.k % gk == 0 && l.n % gn == 0 && ((l.k / gk) * (l.n / gn)) % g.gz == 0;
}
std::string axonn_problem(const Layer& l, const Grid& g) {
  if (axonn_divides(l, g)) return "";
  if (l.kind == LayerKind::Attention) return heads_problem(l, g);
  const int64_t gk = l.swaps_xy() ? g.gy : g.gx, gn = l.swaps_xy() ? g.gx : g.gy;
  const char* nk = l.swaps_xy() ? "gy" : "gx";
  const char* nn = l.swaps_xy() ? "gx" : "gy";
  if (l.k % gk != 0) return not_divisible("k", l.k, nk, gk);
  if (l.n % gn != 0) return not_divisible("n", l.n, nn, gn);
  return not_divisible("local weight block", (l.k / gk) * (l.n / gn), "gz", g.gz);
}

// 2d: W's blocks are k/q x n/q (its Z chunk a k block), the input's k/q columns.
bool summa_divides(const Layer& l, const Grid& g) {
  if (l.kind == LayerKind::Attention) return heads_divide(l, g);
  return l.k % g.gz == 0 && l.n % g.gy == 0 && l.k % g.gy == 0;
}
std::string summa_problem(const Layer& l, const Grid& g) {
  if (summa_divides(l, g)) return "";
  if (l.kind == LayerKind::Attention) return heads_problem(l, g);
  return l.n % g.gy != 0 ? not_divisible("n", l.n, "q (2d)", g.gy) : not_divisible("k", l.k, "q (2d)", g.gy);
}
std::optional<std::string> summa_shape(const Grid& g) {
  if (g.gx != 1 || g.gy != g.gz || g.sequence != 1)
    return std::string("the ") + topo::layout_name(g.layout) + " layout on " + g.to_string() + ": it needs gx = 1, gy = gz (a q x q grid) and no sequence group";
  return std::nullopt;
}

std::optional<std::string> threed_shape(const Grid& g) {
  if (g.sequence != 1) return "the 3d layout with a sequence group (" + g.to_string() + ")";
  return std::nullopt;
}
// Rows split by whole sequences over X and Y.
std::optional<std::string> threed_microbatch(const Grid& g, int64_t microbatch_seqs) {
  if ((microbatch_seqs / g.gz) % (g.gx * g.gy) != 0)
    return not_divisible("micro-batch sequences per Z-rank", microbatch_seqs / g.gz, "gx*gy (3d)", g.gx * g.gy);
  return std::nullopt;
}

// Indexed by topo::TensorLayout.
const std::array<LayoutRules, 4> kRules = {{
    {topo::TensorLayout::Axonn3d, topo::Axis::X, false, false, true, false, nullptr, nullptr, axonn_divides,
     axonn_problem},
    {topo::TensorLayout::TwoD, topo::Axis::Y, false, true, false, false, summa_shape, nullptr, summa_divides,
     summa_problem},
    {topo::TensorLayout::ThreeD, topo::Axis::X, true, true, true, true, threed_shape, threed_microbatch, axonn_divides,
     axonn_problem},
    {topo::TensorLayout::TwoDBroadcast, topo::Axis::Y, false, false, false, false, summa_shape, nullptr, summa_divides,
     summa_problem, true},
}};

}  // namespace

const LayoutRules& layout_rules(topo::TensorLayout layout) {
  const auto i = static_cast<size_t>(layout);
  AXONN_ASSERT(i < kRules.size() && kRules[i].layout == layout);
  return kRules[i];
}

std::string not_divisible(const std::string& what, int64_t a, const std::string& by, int64_t b) {
  return what + "=" + std::to_string(a) + " is not divisible by " + by + "=" + std::to_string(b);
}

}  // namespace axonn::plan
