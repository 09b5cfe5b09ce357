// Reading and writing topology JSON files (format: docs/formats.md, JSON Schema:
// topology/schema/topology.schema.json).
//
// Example:
//   auto t = axonn::topo::load_topology("perlmutter");        // a shipped cluster by name
//   auto u = axonn::topo::load_topology("my/cluster.json");   // or a path
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "axonn/common/json_reader.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::topo {

// Validates every field; throws axonn::Error naming `origin` and the field.
Topology topology_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json topology_to_json(const Topology& t);

// The one grid <-> JSON mapping: {"gx": .., "gy": .., "gz": .., "gdata": .., "ginter": ..}.
nlohmann::json grid_to_json(const Grid& g);
Grid grid_from_json(ObjectReader r);  // every field a positive integer; no other field

// The one mesh <-> JSON mapping: [{"name": "x", "size": 2}, ...], innermost axis first.
// mesh_from_json reads r's field `key` and throws InputError naming it for anything else.
nlohmann::json mesh_to_json(const Mesh& m);
Mesh mesh_from_json(ObjectReader& r, const std::string& key);

// `name_or_path`: a file path, or the name of a file in topology/clusters/.
Topology load_topology(const std::string& name_or_path);

}  // namespace axonn::topo
