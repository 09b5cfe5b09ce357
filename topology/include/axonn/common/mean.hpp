// The one arithmetic mean of axonn: the sum of a sample over its count. Used where a
// measured total matters more than a typical value (a step's waits add up:
// calibrate's sync-wait loop), and by the planner's statistics (planner::mean).
//
// Example:
//   axonn::mean({1.0, 2.0, 6.0});   // 3.0
#pragma once

#include <numeric>
#include <vector>

#include "axonn/common/error.hpp"

namespace axonn {

// Throws InternalError for an empty sample (a caller that measured nothing).
inline double mean(const std::vector<double>& v) {
  if (v.empty()) throw InternalError("mean", "empty sample", "", "at least one value");
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace axonn
