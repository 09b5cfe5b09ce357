// The cores a rank has to itself; see axonn/runtime/machine_cores.hpp.
#include "axonn/runtime/machine_cores.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include <torch/torch.h>

namespace axonn::runtime {

double cgroup_core_quota() {
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {  // "ID:CONTROLLERS:PATH"; v2: "0::PATH"
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    double quota = 0, period = 0;
    if (controllers.empty()) {  // v2: cpu.max holds "QUOTA PERIOD" or "max PERIOD"
      std::ifstream max("/sys/fs/cgroup" + path + "/cpu.max");
      std::string q;
      if (max >> q >> period && q != "max") quota = std::stod(q);
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
        if (q >> quota && p >> period) break;
        quota = period = 0;
      }
    }
    if (quota > 0 && period > 0) return quota / period;
  }
  return 0;
}

double measure_cores_per_rank(MpiCommunicator& world) {
  std::string machine;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  if (!(boot && std::getline(boot, machine)) || machine.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    machine = host;
  }
  // The colour of a machine: its lowest rank (the hash in two exact 32-bit halves).
  const uint64_t id = std::hash<std::string>{}(machine);
  at::Tensor ids = at::empty({world.size(), 2}, at::kDouble);
  world.all_gather(at::tensor({static_cast<double>(id >> 32), static_cast<double>(id & 0xffffffffu)}, at::kDouble), ids)
      ->wait();
  auto all = ids.accessor<double, 2>();
  int color = 0;
  while (all[color][0] != all[world.rank()][0] || all[color][1] != all[world.rank()][1]) ++color;
  auto same_machine = world.split(color, world.rank(), "machine");
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
  all_reduce_now(*same_machine, cores, ReduceOp::Max);  // the union over the machine's ranks
  double share = cores.sum().item<double>() / same_machine->size();
  if (const double quota = cgroup_core_quota(); quota > 0) share = std::min(share, quota);
  // The fewest over the ranks: the largest negated share.
  at::Tensor negated = at::full({1}, -share, at::kDouble);
  all_reduce_now(world, negated, ReduceOp::Max);
  return -negated.item<double>();
}

}  // namespace axonn::runtime
