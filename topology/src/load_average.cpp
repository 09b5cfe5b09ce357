// Reading the machine's load; see axonn/common/load_average.hpp.
#include "axonn/common/load_average.hpp"

#include <cstdio>
#include <fstream>
#include <thread>

namespace axonn {

std::optional<LoadAverage> read_load_average(const std::string& path) {
  std::ifstream f(path);
  LoadAverage l;
  if (!(f >> l.one_min >> l.five_min >> l.fifteen_min)) return std::nullopt;
  l.cores = std::thread::hardware_concurrency();
  return l;
}

std::string describe(const LoadAverage& l) {
  char text[128];
  std::snprintf(text, sizeof text, "load average %.2f / %.2f / %.2f (1 / 5 / 15 min) on %u cores", l.one_min,
                l.five_min, l.fifteen_min, l.cores);
  return text;
}

}  // namespace axonn
