// The one median of axonn: the middle value of a sample, the mean of the two middle
// values for an even count. Used for every measured time (benchmarks, calibration,
// validation), so that "median" means the same thing everywhere.
//
// Example:
//   axonn::median({3.0, 1.0, 2.0});        // 2.0
//   axonn::median({4.0, 1.0, 2.0, 3.0});   // 2.5
#pragma once

#include <algorithm>
#include <vector>

#include "axonn/common/error.hpp"

namespace axonn {

// Throws InternalError for an empty sample (a caller that measured nothing).
inline double median(std::vector<double> v) {
  if (v.empty()) throw InternalError("median", "empty sample", "", "at least one value");
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<long>(n / 2), v.end());
  const double upper = v[n / 2];
  if (n % 2) return upper;
  return 0.5 * (*std::max_element(v.begin(), v.begin() + static_cast<long>(n / 2)) + upper);
}

}  // namespace axonn
