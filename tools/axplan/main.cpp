// axplan: the planner command line (see axplan_cli.hpp and README.md).
#include <iostream>

#include "axplan_cli.hpp"
#ifdef AXONN_AXPLAN_WITH_TORCH
#include "matmul_timer.hpp"
#endif

int main(int argc, char** argv) {
  axonn::tools::MatmulTimer timer;
#ifdef AXONN_AXPLAN_WITH_TORCH
  timer = axonn::tools::time_matmul_libtorch;
#endif
  return axonn::tools::run_axplan(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr, timer);
}
