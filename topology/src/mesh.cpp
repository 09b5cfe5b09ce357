// The named device mesh and its rank layout; see axonn/topology/mesh.hpp.
#include "axonn/topology/mesh.hpp"

#include <algorithm>

#include "axonn/common/error.hpp"

namespace axonn::topo {

std::optional<std::string> mesh_problem(const std::vector<MeshAxis>& axes) {
  constexpr int64_t kMaxRanks = int64_t{1} << 40;  // grid_from_json's bound
  int64_t total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto& a = axes[i];
    if (a.name.empty()) return "axis " + std::to_string(i) + " has no name";
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == a.name) return "axis \"" + a.name + "\" appears twice";
    if (a.size < 1) return "axis \"" + a.name + "\" has size " + std::to_string(a.size) + " (below 1)";
    if (a.size > kMaxRanks / total) return "the mesh has more than 2^40 ranks";
    total *= a.size;
  }
  return std::nullopt;
}

Mesh::Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  AXONN_ASSERT(!mesh_problem(axes_));
  stride_.reserve(axes_.size());
  for (const auto& a : axes_) {
    stride_.push_back(total_);
    total_ *= a.size;
  }
}

int Mesh::index(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t Mesh::size(const std::string& name) const {
  const int i = index(name);
  return i < 0 ? 1 : axes_[i].size;
}

int64_t Mesh::stride(const std::string& name) const {
  const int i = index(name);
  AXONN_ASSERT(i >= 0);
  return stride_[i];
}

std::vector<int64_t> Mesh::coords_of(int64_t rank) const {
  AXONN_ASSERT(rank >= 0 && rank < total_);
  std::vector<int64_t> c(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) c[i] = (rank / stride_[i]) % axes_[i].size;
  return c;
}

int64_t Mesh::rank_of(const std::vector<int64_t>& coords) const {
  AXONN_ASSERT(coords.size() == axes_.size());
  int64_t r = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    AXONN_ASSERT(coords[i] >= 0 && coords[i] < axes_[i].size);
    r += coords[i] * stride_[i];
  }
  return r;
}

int64_t Mesh::group_root(int64_t rank, const std::vector<std::string>& names) const {
  std::vector<int64_t> c = coords_of(rank);
  for (const auto& n : names)
    if (const int i = index(n); i >= 0) c[i] = 0;
  return rank_of(c);
}

std::vector<int64_t> Mesh::group_ranks(int64_t rank, const std::vector<std::string>& names) const {
  std::vector<int64_t> out{group_root(rank, names)};
  std::vector<bool> done(axes_.size(), false);
  for (const auto& n : names) {  // every combination of the group's coordinates
    const int i = index(n);
    if (i < 0 || done[i]) continue;  // absent, or named twice
    done[i] = true;
    const size_t before = out.size();
    for (int64_t k = 1; k < axes_[i].size; ++k)
      for (size_t m = 0; m < before; ++m) out.push_back(out[m] + k * stride_[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Mesh::to_string() const {
  std::string s;
  for (const auto& a : axes_) s += (s.empty() ? "" : " ") + a.name + "=" + std::to_string(a.size);
  return s.empty() ? "(one rank)" : s;
}

}  // namespace axonn::topo
