// Finding shipped data files (topologies, model descriptions) by name.
//
// A name like "perlmutter" is looked up as <dir>/<subdir>/perlmutter.json in, in order:
// $AXONN_DATA_DIR, the source tree the binary was built from, and the install prefix
// (share/axonn). Anything that names an existing file is used as a path.
//
// Example:
//   resolve_data_file("topology", "topology/clusters", "perlmutter");
//     // -> "/src/axonn/topology/clusters/perlmutter.json"
#pragma once

#include <string>
#include <vector>

namespace axonn {

std::string resolve_data_file(const std::string& module, const std::string& subdir,
                              const std::string& name_or_path);

// The names (file stems) shipped in `subdir`, sorted.
std::vector<std::string> list_data_names(const std::string& subdir);

}  // namespace axonn
