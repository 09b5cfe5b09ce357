// Fitting latency and bandwidth to measured collective times (axplan calibrate;
// docs/model.md section 1). Each sample is one collective: the number of ring steps
// it takes and the bytes each GPU moves, so that the model of section 1 reads
//     t = alpha * steps + bytes_moved / beta
// (all-gather / reduce-scatter: steps = p-1, bytes_moved = (p-1)/p * B; all-reduce
// twice both). Least squares in (alpha, 1/beta) with Eigen; alpha is clamped to >= 0
// (refit with alpha = 0 when the free fit gives a negative latency).
//
// Example:
//   auto f = fit_latency_bandwidth({{1, 1e6, 2e-3}, {1, 4e6, 5e-3}});   // alpha 1e-3 s, beta 1e9 B/s
#pragma once

#include <vector>

namespace axonn::planner {

struct CollectiveSample {
  double steps = 0;        // ring steps (p-1 for AG/RS, 2(p-1) for AR)
  double bytes_moved = 0;  // bytes per GPU on the wire
  double seconds = 0;      // measured
};

// Ring-model terms of one collective over p GPUs with a full buffer of `bytes`.
CollectiveSample all_gather_sample(int p, double bytes, double seconds);
CollectiveSample all_reduce_sample(int p, double bytes, double seconds);

struct BandwidthFit {
  double alpha_s = 0;            // latency per ring step, seconds
  double beta_bytes_per_s = 0;   // bandwidth, bytes/s
  double r2 = 0;                 // coefficient of determination of the times
  double max_relative_error = 0; // worst |fitted - measured| / measured
};

// What a fit is of, for its error messages: the same least squares fits matmul times
// against FLOPs and sync waits against the compute before them, and a refusal names
// the fit and the quantity the times should have grown with.
struct FitQuantities {
  const char* fit = "bandwidth fit";     // e.g. "matmul fit"
  const char* size = "message size";      // what bytes_moved holds there, e.g. "FLOPs"
};
inline constexpr FitQuantities kMatmulFit{"matmul fit", "FLOPs"};
inline constexpr FitQuantities kSyncWaitFit{"sync-wait fit", "compute since the last collective"};

// Needs at least two samples with different bytes_moved; throws axonn::InputError
// naming `what` otherwise, or where the fitted time per unit is not positive.
BandwidthFit fit_latency_bandwidth(const std::vector<CollectiveSample>& samples, const FitQuantities& what = {});

}  // namespace axonn::planner
