// The cores a rank has to itself; see axonn/runtime/machine_cores.hpp.
#include "axonn/runtime/machine_cores.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace axonn::runtime {

namespace {

// A number as the kernel writes it in a cgroup file; 0 for anything else.
double cgroup_number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && v > 0 ? v : 0.0;
}

// A key as two exact halves of its 64-bit hash, for a double tensor.
std::pair<double, double> key_halves(const std::string& key) {
  const uint64_t id = std::hash<std::string>{}(key);
  return {static_cast<double>(id >> 32), static_cast<double>(id & 0xffffffffu)};
}

// The ranks of `comm` with equal `key`s in one communicator: the colour of a key is the
// lowest rank holding it (compared by the key's 64-bit hash; two keys of equal hash
// count as one). Collective over `comm`.
std::unique_ptr<Communicator> split_by_key(Communicator& comm, const std::string& key, const std::string& name) {
  const auto [high, low] = key_halves(key);
  at::Tensor ids = at::empty({comm.size(), 2}, at::kDouble);
  comm.all_gather(at::tensor({high, low}, at::kDouble), ids)->wait();
  auto all = ids.accessor<double, 2>();
  int color = 0;
  while (all[color][0] != high || all[color][1] != low) ++color;
  return comm.split(color, comm.rank(), name);
}

// Each quota's part: the quota over the ranks of `comm` held to it (those whose own
// cgroup is it or below it), the least of them; `fallback` where there are none.
// Collective over `comm`.
double least_quota_part(Communicator& comm, const std::vector<CpuQuota>& quotas, double fallback) {
  constexpr int64_t kLevels = 16;  // cgroups with a quota on one path, at most counted
  at::Tensor mine = at::zeros({kLevels, 2}, at::kDouble), all = at::empty({comm.size(), kLevels, 2}, at::kDouble);
  const int64_t levels = std::min<int64_t>(kLevels, static_cast<int64_t>(quotas.size()));
  auto m = mine.accessor<double, 2>();
  for (int64_t l = 0; l < levels; ++l) std::tie(m[l][0], m[l][1]) = key_halves(quotas[l].cgroup);
  comm.all_gather(mine, all)->wait();
  auto a = all.accessor<double, 3>();
  double part = fallback;
  for (int64_t l = 0; l < levels; ++l) {
    int held = 0;
    for (int r = 0; r < comm.size(); ++r)
      for (int64_t k = 0; k < kLevels; ++k) held += a[r][k][0] == m[l][0] && a[r][k][1] == m[l][1];
    part = std::min(part, quotas[l].cores / std::max(held, 1));
  }
  return part;
}

// A mount of a cgroup hierarchy, from mountinfo: which cgroup its root is, and where it
// is mounted; `v2` for the unified hierarchy, else a v1 hierarchy with the cpu controller.
struct CgroupMount {
  bool v2 = false;
  std::string root, at;
};

// A mountinfo path field, its octal escapes ("\040" for a space) undone.
std::string unescape_mount_path(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && std::isdigit(static_cast<unsigned char>(field[i + 1]))) {
      out += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// Whether a comma-separated list holds `item`.
bool lists(const std::string& list, const std::string& item) {
  std::istringstream in(list);
  std::string each;
  while (std::getline(in, each, ','))
    if (each == item) return true;
  return false;
}

// The cgroup mounts that can hold a CPU quota: "ID PARENT DEV ROOT POINT OPTIONS
// [TAGS...] - TYPE SOURCE SUPEROPTIONS" per line.
std::vector<CgroupMount> cgroup_mounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, at, word;
    if (!(fields >> id >> parent >> dev >> root >> at)) continue;
    while (fields >> word && word != "-") {
    }
    std::string type, source, options;
    if (!(fields >> type >> source >> options)) continue;
    if (type == "cgroup2" || (type == "cgroup" && lists(options, "cpu")))
      mounts.push_back({type == "cgroup2", unescape_mount_path(root), unescape_mount_path(at)});
  }
  return mounts;
}

// The quota a cgroup directory sets, in cores; 0 for none or none readable.
double quota_in(const std::string& dir, bool v2) {
  std::string quota, period;
  if (v2) {  // "QUOTA PERIOD", or "max PERIOD"
    std::ifstream max(dir + "/cpu.max");
    if (!(max >> quota >> period)) return 0;
  } else {
    std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
    if (!(q >> quota && p >> period)) return 0;
  }
  const double q = cgroup_number(quota), p = cgroup_number(period);
  return q > 0 && p > 0 ? q / p : 0;
}

}  // namespace

std::vector<CpuQuota> cgroup_cpu_quotas(const std::string& proc) {
  const std::vector<CgroupMount> mounts = cgroup_mounts(proc + "/mountinfo");
  std::vector<CpuQuota> quotas;
  std::ifstream groups(proc + "/cgroup");
  std::string line;
  while (std::getline(groups, line)) {  // "ID:CONTROLLERS:PATH"; v2: "0::PATH"
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    const bool v2 = controllers.empty();
    if (!v2 && !lists(controllers, "cpu")) continue;
    for (const CgroupMount& mount : mounts) {
      if (mount.v2 != v2) continue;
      // The mount shows the hierarchy from its root down: the cgroup's directory is its
      // path below that root (a container's view without a cgroup namespace shows its
      // own cgroup as the root, named in full in the cgroup file).
      const std::string root = mount.root == "/" ? "" : mount.root;
      if (path.compare(0, root.size(), root) != 0 || (path.size() > root.size() && path[root.size()] != '/')) continue;
      std::string below = path.substr(root.size());
      if (below == "/") below.clear();
      bool found = false;
      for (;;) {  // the cgroup, then each ancestor the mount shows: the kernel holds a process to all
        const double cores = quota_in(mount.at + below, v2);
        found = found || std::ifstream(mount.at + below + (v2 ? "/cgroup.procs" : "/cpu.cfs_period_us")).good();
        const std::string name = root + below;
        if (cores > 0) quotas.push_back({cores, (v2 ? "v2:" : "v1:") + (name.empty() ? "/" : name)});
        if (below.empty()) break;
        below.erase(below.rfind('/'));
      }
      if (found) break;  // one mount of a hierarchy is enough
    }
  }
  return quotas;
}

double measure_cores_per_rank(MpiCommunicator& world) {
  std::string machine;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  if (!(boot && std::getline(boot, machine)) || machine.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    machine = host;
  }
  auto same_machine = split_by_key(world, machine, "machine");
  cpu_set_t mask;
  CPU_ZERO(&mask);
  at::Tensor cores = at::zeros({CPU_SETSIZE}, at::kDouble);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    auto cpus = cores.accessor<double, 1>();
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &mask)) cpus[cpu] = 1.0;
  } else {
    cores.narrow(0, 0, std::clamp<long>(sysconf(_SC_NPROCESSORS_ONLN), 1, CPU_SETSIZE)).fill_(1.0);
  }
  Communicator& machine_ranks = *same_machine;
  all_reduce_now(machine_ranks, cores, ReduceOp::Max);  // the union over the machine's ranks
  double share = cores.sum().item<double>() / machine_ranks.size();
  // A quota is its cgroup's: the machine's ranks held to it share it.
  share = least_quota_part(machine_ranks, cgroup_cpu_quotas(), share);
  // The fewest over the ranks: the largest negated share.
  at::Tensor negated = at::full({1}, -share, at::kDouble);
  all_reduce_now(world, negated, ReduceOp::Max);
  return -negated.item<double>();
}

}  // namespace axonn::runtime
