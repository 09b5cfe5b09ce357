// The cores a rank has to itself; see axonn/runtime/machine_cores.hpp.
#include "axonn/runtime/machine_cores.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include <torch/torch.h>

namespace axonn::runtime {

namespace {

// A number as the kernel writes it in a cgroup file; 0 for anything else.
double cgroup_number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && v > 0 ? v : 0.0;
}

// The ranks of `comm` with equal `key`s in one communicator: the colour of a key is the
// lowest rank holding it (compared by the key's 64-bit hash, in two exact 32-bit halves;
// two keys of equal hash count as one). Collective over `comm`.
std::unique_ptr<Communicator> split_by_key(Communicator& comm, const std::string& key, const std::string& name) {
  const uint64_t id = std::hash<std::string>{}(key);
  at::Tensor ids = at::empty({comm.size(), 2}, at::kDouble);
  comm.all_gather(at::tensor({static_cast<double>(id >> 32), static_cast<double>(id & 0xffffffffu)}, at::kDouble), ids)
      ->wait();
  auto all = ids.accessor<double, 2>();
  int color = 0;
  while (all[color][0] != all[comm.rank()][0] || all[color][1] != all[comm.rank()][1]) ++color;
  return comm.split(color, comm.rank(), name);
}

}  // namespace

CpuQuota cgroup_cpu_quota() {
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {  // "ID:CONTROLLERS:PATH"; v2: "0::PATH"
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    double quota = 0, period = 0;
    if (controllers.empty()) {  // v2: cpu.max holds "QUOTA PERIOD" or "max PERIOD"
      std::ifstream max("/sys/fs/cgroup" + path + "/cpu.max");
      std::string q, p;
      if (max >> q >> p) quota = cgroup_number(q), period = cgroup_number(p);
    } else {
      bool cpu = false;  // "cpu", or "cpu,cpuacct" mounted as such
      for (size_t at = 0; at != std::string::npos;) {
        const auto comma = controllers.find(',', at);
        cpu = cpu || controllers.substr(at, comma == std::string::npos ? comma : comma - at) == "cpu";
        at = comma == std::string::npos ? comma : comma + 1;
      }
      if (!cpu) continue;
      for (const std::string& mount : {"/sys/fs/cgroup/" + controllers, std::string("/sys/fs/cgroup/cpu")}) {
        std::ifstream q(mount + path + "/cpu.cfs_quota_us"), p(mount + path + "/cpu.cfs_period_us");
        std::string qs, ps;
        if (q >> qs && p >> ps) {
          quota = cgroup_number(qs), period = cgroup_number(ps);
          break;
        }
      }
    }
    if (quota > 0 && period > 0) return {quota / period, (controllers.empty() ? "v2:" : "v1:") + path};
  }
  return {};
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
  // A quota is its cgroup's: the machine's ranks in one cgroup share it.
  const CpuQuota quota = cgroup_cpu_quota();
  auto same_cgroup = split_by_key(machine_ranks, quota.cores > 0 ? quota.cgroup : std::string(), "cgroup");
  if (quota.cores > 0) share = std::min(share, quota.cores / same_cgroup->size());
  // The fewest over the ranks: the largest negated share.
  at::Tensor negated = at::full({1}, -share, at::kDouble);
  all_reduce_now(world, negated, ReduceOp::Max);
  return -negated.item<double>();
}

}  // namespace axonn::runtime
