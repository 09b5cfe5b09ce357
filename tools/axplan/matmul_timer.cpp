// The LibTorch matmul timer for `axplan calibrate --model` (calibrate.hpp): the same
// at::matmul the runtime runs, one thread per rank, fp32 (the runtime's dtype on CPU).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "matmul_timer.hpp"

namespace axonn::tools {

double time_matmul_libtorch(const planner::MatmulShape& s, int repeats) {
  at::set_num_threads(1);
  const bool batched = s.batch > 1;
  at::Tensor a = batched ? at::randn({s.batch, s.m, s.k}) : at::randn({s.m, s.k});
  at::Tensor b = batched ? at::randn({s.batch, s.k, s.n}) : at::randn({s.k, s.n});
  at::Tensor c = at::matmul(a, b);  // warm-up (and the output allocation)
  // Each timed run repeats the product for at least kMinRun: ranks sharing cores are
  // descheduled in slices of milliseconds, and a single short call would measure the
  // scheduler instead of the average rate the ranks get.
  constexpr double kMinRun = 0.05;  // seconds
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    int64_t calls = 0;
    do {
      c = at::matmul(a, b);
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < kMinRun);
    times.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace axonn::tools
