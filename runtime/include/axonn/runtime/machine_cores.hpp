// How many of its machine's cores a rank of the job has to itself: the ranks are grouped
// by machine (one running kernel: its boot id, which network namespaces share, else the
// host name; two machines whose ids had the same 64-bit hash would count as one), and a
// machine's cores are the logical CPUs any of its ranks may run on (the union of their
// affinity masks), shared evenly; where a rank's cgroup or one of its ancestors has a CPU
// quota (the kernel's CFS bandwidth control: cgroup v1's cpu.cfs_quota_us over
// cpu.cfs_period_us, or v2's cpu.max, found through /proc/self/cgroup and the mounts in
// /proc/self/mountinfo), the machine's ranks in that cgroup or below it share the quota,
// and a rank has at most its part of each. Below 1, the ranks time-share the cores: the
// emulated clusters' 8 ranks on the development machine's 2 have 0.25 each, or their
// quota under `tools/emulated_cluster.sh --core-share` (a cgroup per rank).
// calibrate writes it to the topology (ClusterMeasurements::cores_per_rank); axrun and
// calibrate choose how a waiting rank passes the time by it (--wait auto).
//
// Example:
//   const double cores = axonn::runtime::measure_cores_per_rank(*world);  // collective
#pragma once

#include <string>
#include <vector>

#include "axonn/runtime/mpi_communicator.hpp"

namespace axonn::runtime {

// The fewest cores a rank of `world` has to itself, over the ranks. Collective over
// `world`; every rank returns the same value.
double measure_cores_per_rank(MpiCommunicator& world);

// A CPU quota that holds this process: in cores, and its cgroup ("v1:PATH" or "v2:PATH",
// the path as /proc/self/cgroup names it).
struct CpuQuota {
  double cores = 0;
  std::string cgroup;
};

// The quotas on this process's cgroup and its ancestors, its own first; empty where none
// is set or none is readable. A cgroup's directory is its mount point in
// `proc`/mountinfo joined to its path in `proc`/cgroup below the mount's root, so a
// container that sees its own cgroup as the root (cgroup v1, no cgroup namespace) reads
// it too. `proc` is /proc/self but for tests.
std::vector<CpuQuota> cgroup_cpu_quotas(const std::string& proc = "/proc/self");

}  // namespace axonn::runtime
