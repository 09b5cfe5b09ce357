// How many of its machine's cores a rank of the job has to itself: the ranks are grouped
// by machine (one running kernel: its boot id, which network namespaces share, else the
// host name; two machines whose ids had the same 64-bit hash would count as one), and a
// machine's cores are the logical CPUs any of its ranks may run on (the union of their
// affinity masks; a CPU quota does not show). Below 1, the ranks time-share the cores:
// the emulated clusters' 8 ranks on the development machine's 2 have 0.25 each.
// calibrate writes it to the topology (ClusterMeasurements::cores_per_rank); axrun and
// calibrate choose how a waiting rank passes the time by it (--wait auto).
//
// Example:
//   const double cores = axonn::runtime::measure_cores_per_rank(*world);  // collective
#pragma once

#include "axonn/runtime/mpi_communicator.hpp"

namespace axonn::runtime {

// The fewest cores a rank of `world` has to itself, over the machines. Collective over
// `world`; every rank returns the same value.
double measure_cores_per_rank(MpiCommunicator& world);

}  // namespace axonn::runtime
