// A GPU's matmul model fitted to products measured one at a time on that GPU (axplan
// fit-matmul; docs/model.md section 7, docs/validation.md "Matrix products measured on
// a GPU"). The model is the roofline of section 7:
//   t = overhead + max(flops / rate, bytes / memory_bytes_per_s)
// with bytes = matmul_bytes (half-precision operands and result, once each) and the
// memory bandwidth given (the datasheet's). rate (FLOP/s) and overhead (seconds per
// call) are fitted by linear least squares on the relative errors, (predicted -
// measured) / measured, so a 10 us product weighs as much as a 100 ms one. Which side
// of the max each product is on depends on the rate: the fit starts with every product
// compute-bound and refits until no product changes side (a fixed point of the sides,
// not a search over every assignment of them; at most 2 x products refits, else
// `settled` is false). A negative overhead is clamped to 0 and the rate refitted alone.
//
// Example (two compute-bound products, timed at 500 TFLOP/s plus 10 us each):
//   const double f1 = 2.0 * 4096 * 4096 * 4096, f2 = 2.0 * 8192 * 8192 * 8192;   // FLOP
//   fit_matmul_roofline({{4096, 4096, 4096, 1, 10e-6 + f1 / 500e12},
//                        {8192, 8192, 8192, 1, 10e-6 + f2 / 500e12}}, 3.35e12)
//     -> rate 500e12 FLOP/s, overhead 10e-6 s, mape 0
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "axonn/topology/topology.hpp"

namespace axonn::planner {

struct MatmulFit {
  double rate_flops_per_s = 0;  // sustained matmul rate
  double overhead_s = 0;        // fixed cost of one call, >= 0
  size_t memory_bound = 0;      // fitted products whose memory side is the larger
  size_t refits = 0;            // times the sides changed and the fit was redone
  bool settled = true;          // false: the sides still changed after 2 x products refits
                                //        (the fit's sides and its rate's disagree)
  double mape = 0;              // mean |relative error| over the fitted products, fraction
};

// Throws InputError, naming `where` (the products' origin), when fewer than two
// compute-bound products of different FLOPs remain, a size or time is not positive,
// or the fitted rate is not positive (times that do not grow with FLOPs);
// memory_bytes_per_s = 0 means no memory side.
MatmulFit fit_matmul_roofline(const std::vector<topo::MatmulTiming>& measured, double memory_bytes_per_s,
                              const std::string& where = "matmul fit");

}  // namespace axonn::planner
