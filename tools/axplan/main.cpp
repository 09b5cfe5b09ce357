// axplan: the planner command line (see axplan_cli.hpp and README.md). `axplan
// calibrate` replaces this process with the sibling program axplan-calibrate.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "axonn/common/error.hpp"
#include "axplan_cli.hpp"

namespace {

namespace fs = std::filesystem;

// Runs `program` from the directory of this executable (as installed: both in bin/).
int exec_sibling(const std::string& program, const std::vector<std::string>& args, std::ostream& err) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path path = self.parent_path() / program;
  if (ec || !fs::is_regular_file(path)) {
    err << "axplan: [axplan] " << program << " not found: " << path.string()
        << "; expected a build with the runtime (LibTorch and MPI), which builds it next to axplan\n";
    return axonn::kExitUsage;
  }
  std::vector<char*> argv;
  std::string name = path.string();
  argv.push_back(name.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(name.c_str(), argv.data());
  err << "axplan: [axplan] cannot run " << name << ": " << std::strerror(errno) << "\n";
  return axonn::kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  return axonn::tools::run_axplan(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr, exec_sibling);
}
