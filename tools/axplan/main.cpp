// axplan: the planner command line (see axplan_cli.hpp and README.md).
#include <iostream>

#include "axplan_cli.hpp"

int main(int argc, char** argv) {
  return axonn::tools::run_axplan(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}
