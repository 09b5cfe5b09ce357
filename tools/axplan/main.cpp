// axplan: the planner command line (see axplan_cli.hpp and README.md).
#include <iostream>

#include "axplan_cli.hpp"
#ifdef AXONN_AXPLAN_WITH_TORCH
#include "kernel_timer.hpp"
#endif

int main(int argc, char** argv) {
  axonn::tools::KernelTimers timers;
#ifdef AXONN_AXPLAN_WITH_TORCH
  timers.matmul = axonn::tools::time_matmul_libtorch;
  timers.elementwise = axonn::tools::time_elementwise_libtorch;
#endif
  return axonn::tools::run_axplan(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr, timers);
}
