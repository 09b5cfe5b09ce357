// Finding shipped data files by name; see axonn/common/data_path.hpp.
#include "axonn/common/data_path.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "axonn/common/error.hpp"

namespace fs = std::filesystem;

namespace axonn {
namespace {

std::vector<fs::path> search_roots() {
  std::vector<fs::path> roots;
  // AXONN_DATA_DIR: a directory laid out like the source tree (topology/clusters, model_zoo/models).
  if (const char* env = std::getenv("AXONN_DATA_DIR")) roots.emplace_back(env);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = self.parent_path().parent_path() / "share" / "axonn";
    if (fs::is_directory(installed, ec)) roots.push_back(installed);
  }
#ifdef AXONN_SOURCE_DATA_DIR
  roots.emplace_back(AXONN_SOURCE_DATA_DIR);
#endif
#ifdef AXONN_INSTALL_DATA_DIR
  roots.emplace_back(AXONN_INSTALL_DATA_DIR);
#endif
  return roots;
}

}  // namespace

std::vector<std::string> list_data_names(const std::string& subdir) {
  std::set<std::string> names;
  for (const auto& root : search_roots()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / subdir, ec))
      if (e.path().extension() == ".json") names.insert(e.path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string resolve_data_file(const std::string& module, const std::string& subdir,
                              const std::string& name_or_path) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                         fs::path(name_or_path).extension() == ".json";
  if (!looks_like_path) {
    for (const auto& root : search_roots()) {
      fs::path p = root / subdir / (name_or_path + ".json");
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  }
  std::string names;
  for (const auto& n : list_data_names(subdir)) names += (names.empty() ? "" : ", ") + n;
  throw InputError(module, "not found", "'" + name_or_path + "'",
              "an existing JSON file or a shipped name (" + (names.empty() ? "none found" : names) + ")");
}

}  // namespace axonn
