// The named device mesh: the job's ranks as a grid of named axes with sizes, listed in
// placement order (innermost first), and the rank layout over it, the one function
// that maps a rank to its coordinates and back. The planner models where a group lands
// with it; the runtime builds its communicators with it; the plan writes it.
//
//   rank = c[0] + n[0] * (c[1] + n[1] * (c[2] + ...))
// (c: the rank's coordinate on each axis, n: the axes' sizes, innermost axis first).
//
// Example (8 ranks: x of 2 innermost, then data of 4):
//   Mesh m({{"x", 2}, {"data", 4}});
//   m.stride("data");                 // 2: the ranks between consecutive data members
//   m.group_ranks(5, {"data"});       // {1, 3, 5, 7}
//   m.group_ranks(5, {"x"});          // {4, 5}
//   m.group_ranks(5, {"x", "data"});  // all eight
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace axonn::topo {

struct MeshAxis {
  std::string name;
  int64_t size = 1;  // ranks along the axis
  bool operator==(const MeshAxis& o) const { return name == o.name && size == o.size; }
};

// The first problem of `axes` as a mesh (an empty or repeated name, a size below 1, more
// than 2^40 ranks), or nullopt. Readers check input with it before building a Mesh.
std::optional<std::string> mesh_problem(const std::vector<MeshAxis>& axes);

class Mesh {
 public:
  Mesh() = default;  // no axes: one rank
  // `axes` innermost first; a broken mesh (mesh_problem) fails AXONN_ASSERT.
  explicit Mesh(std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int64_t total() const { return total_; }  // ranks
  int index(const std::string& name) const;  // position in axes(), -1 if absent
  bool has(const std::string& name) const { return index(name) >= 0; }
  int64_t size(const std::string& name) const;  // 1 for an axis the mesh lacks
  // Ranks between consecutive members along `name`: the product of the sizes placed
  // inside it (the "ip" of the 4D paper's eq. 10). The axis must exist.
  int64_t stride(const std::string& name) const;

  std::vector<int64_t> coords_of(int64_t rank) const;         // one per axis, axes() order
  int64_t rank_of(const std::vector<int64_t>& coords) const;  // the inverse
  // The ranks that share `rank`'s coordinates on every axis but `names` (absent names
  // add nothing), in increasing order; the lowest of them is group_root.
  std::vector<int64_t> group_ranks(int64_t rank, const std::vector<std::string>& names) const;
  int64_t group_root(int64_t rank, const std::vector<std::string>& names) const;

  std::string to_string() const;  // "x=2 data=4", innermost first
  bool operator==(const Mesh& o) const { return axes_ == o.axes_; }

 private:
  std::vector<MeshAxis> axes_;
  std::vector<int64_t> stride_;
  int64_t total_ = 1;
};

}  // namespace axonn::topo
