// SUMMA's broadcast form, its memory; see axonn/planner/summa_broadcast_memory.hpp.
#include "axonn/planner/summa_broadcast_memory.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"

namespace axonn::planner {

double summa_broadcast_peak_bytes(const model::ModelDescription& m, const topo::Grid& g, int64_t tokens,
                                  double element_bytes) {
  const int64_t q = g.gy, d = g.gdata;
  if (!g.summa() || g.gx != 1 || g.gz != q || g.ginter != 1 || q < 2 || tokens % (d * q) != 0)
    throw InputError("planner", "grid " + g.to_string() + " with " + std::to_string(tokens) + " tokens",
                     "summa_broadcast_peak_bytes", "a 2d-layout grid 1,q,q,d,1 (q >= 2) and tokens divisible by d*q");
  const double rows = static_cast<double>(tokens / (d * q)), w = element_bytes;
  struct Blocks {
    double input, output, weight;  // A_l, O_l, B_l
  };
  std::vector<Blocks> layers;
  for (const model::Layer& l : m.layers) {
    if (l.kind != model::LayerKind::Linear || l.k % q != 0 || l.n % q != 0)
      throw InputError("planner", "layer " + l.name + " of " + m.name, "summa_broadcast_peak_bytes",
                       "linear layers only, with k and n divisible by q = " + std::to_string(q));
    layers.push_back({w * rows * static_cast<double>(l.k / q), w * rows * static_cast<double>(l.n / q),
                      w * static_cast<double>(l.k / q) * static_cast<double>(l.n / q)});
  }
  const double received = static_cast<double>(std::min<int64_t>(q - 1, 2));
  double weights = 0;
  for (const Blocks& b : layers) weights += b.weight;
  double kept_inputs = 0, later_grads = weights, moment = 0;
  for (const Blocks& b : layers) {
    kept_inputs += b.input;
    later_grads -= b.weight;
    const double forward = kept_inputs + b.output + received * (b.input + b.weight);
    const double backward = kept_inputs + later_grads + b.output + 3 * b.input + 3 * b.weight;
    moment = std::max({moment, forward, backward});
  }
  return weights + moment;
}

}  // namespace axonn::planner
