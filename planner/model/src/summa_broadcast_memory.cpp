// SUMMA's broadcast form, its memory; see axonn/planner/summa_broadcast_memory.hpp.
#include "axonn/planner/summa_broadcast_memory.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"

namespace axonn::planner {

namespace {

bool plain_linear(const model::Layer& l) {
  return l.kind == model::LayerKind::Linear && !l.bias && !l.norm_before && !l.gelu_after && !l.residual_after &&
         !l.loss_after;
}

}  // namespace

double summa_broadcast_peak_bytes(const model::ModelDescription& m, const topo::Grid& g, int64_t tokens,
                                  double element_bytes) {
  const int64_t q = g.gy, d = g.gdata;
  if (!g.summa() || g.gx != 1 || g.gz != q || g.ginter != 1 || q < 2 || tokens <= 0 || tokens % (d * q) != 0 ||
      element_bytes <= 0)
    throw InputError("planner",
                     "grid " + g.to_string() + ", " + std::to_string(tokens) + " tokens, " +
                         std::to_string(element_bytes) + " bytes per element",
                     "summa_broadcast_peak_bytes",
                     "a 2d-layout grid 1,q,q,d,1 (q >= 2), tokens > 0 divisible by d*q, and elements of > 0 bytes");
  const double rows = static_cast<double>(tokens / (d * q)), w = element_bytes;
  struct Blocks {
    double input, output, weight;  // A_l, O_l, B_l (bytes)
  };
  std::vector<Blocks> layers;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const model::Layer& l = m.layers[i];
    if (!plain_linear(l) || l.k % q != 0 || l.n % q != 0 || (i > 0 && m.layers[i - 1].n != l.k))
      throw InputError("planner", "layer " + l.name + " of " + m.name, "summa_broadcast_peak_bytes",
                       "a chain of plain linear layers (each k the previous n), k and n divisible by q = " +
                           std::to_string(q));
    layers.push_back({w * rows * static_cast<double>(l.k / q), w * rows * static_cast<double>(l.n / q),
                      w * static_cast<double>(l.k / q) * static_cast<double>(l.n / q)});
  }
  double weights = 0;
  for (const Blocks& b : layers) weights += b.weight;
  double kept_inputs = 0, later_grads = weights, moment = 0;
  for (const Blocks& b : layers) {
    kept_inputs += b.input;
    later_grads -= b.weight;
    moment = std::max(moment, kept_inputs + later_grads + b.output + 3 * b.input + 3 * b.weight);
  }
  return weights + moment;
}

}  // namespace axonn::planner
