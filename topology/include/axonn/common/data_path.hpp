// Finding shipped data files (topologies, model descriptions) by name.
//
// A name like "perlmutter" is looked up as <dir>/<subdir>/perlmutter.json in, in order:
//   1. $AXONN_DATA_DIR;
//   2. <the running program's directory>/../share/axonn: an installed axplan or axrun
//      finds the data installed with it, wherever the install tree was moved;
//   3. the source tree the binary was built from (programs run from the build tree);
//   4. the install prefix configured at build time (CMAKE_INSTALL_PREFIX/share/axonn),
//      for programs of other projects that link the libraries.
// Anything that names an existing file is used as a path.
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
