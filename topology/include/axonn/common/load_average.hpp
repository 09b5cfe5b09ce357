// The machine's load while something is measured: the kernel's load averages (runnable
// and uninterruptible tasks, averaged over 1, 5 and 15 minutes) and the cores they
// compete for. Calibrate and validate record it beside their measurements, so that a
// figure taken on a busy machine says so (issue #16: stable measurements).
//
// Example:
//   if (auto l = axonn::read_load_average()) fmt::print("{}\n", axonn::describe(*l));
//   // "load average 1.52 / 1.20 / 0.98 (1 / 5 / 15 min) on 2 cores"
#pragma once

#include <optional>
#include <string>

namespace axonn {

struct LoadAverage {
  double one_min = 0, five_min = 0, fifteen_min = 0;  // runnable tasks, averaged
  unsigned cores = 0;                                 // std::thread::hardware_concurrency()
};

// Reads `path` (Linux's /proc/loadavg); nothing where it cannot be read or parsed (the
// measurement goes on without it).
std::optional<LoadAverage> read_load_average(const std::string& path = "/proc/loadavg");

std::string describe(const LoadAverage& l);

}  // namespace axonn
