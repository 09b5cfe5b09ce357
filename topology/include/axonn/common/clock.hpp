// The one clock of axonn: seconds on a monotonic (steady) clock, for every timer of
// the runtime, the benchmarks and the calibration.
//
// Example:
//   const double t0 = axonn::now_s();  ...;  const double elapsed_s = axonn::now_s() - t0;
#pragma once

#include <chrono>

namespace axonn {

// Seconds since an arbitrary fixed point (std::chrono::steady_clock); only differences mean anything.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace axonn
