// axplan calibrate: measure a real or emulated cluster under mpirun and write a
// topology file in the planner's format (docs/validation.md).
//
//   mpirun -np 4 axplan calibrate --gpus-per-node 2 [--base perlmutter] [--output cluster.json]
//
// For every group size p and stride ip (ip * p dividing the world size) every rank joins
// the group of ranks {base + ip*j}; all-gather, reduce-scatter and all-reduce are timed
// at several sizes; latency and bandwidth are fitted per (ip, p) (bandwidth_fit.hpp).
// Groups inside a node fill the intra-node table; the ring over all ranks with ip = 1
// gives the inter-node bandwidth (eq. 10 with ip = 1). Memory and peak FLOP/s are copied
// from --base. Rank 0 prints the fits and writes the file.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace axonn::tools {

struct CalibrateOptions {
  int gpus_per_node = 0;
  std::string base = "perlmutter";
  std::string name = "calibrated";
  std::string output = "calibrated_topology.json";
  std::vector<double> sizes_bytes = {1048576, 4194304, 16777216};  // full buffers, bytes
  int repeats = 3;
};

// Initializes MPI if needed. Returns the exit code (2 for bad input).
int run_calibrate(const CalibrateOptions& o, std::ostream& out, std::ostream& err);

}  // namespace axonn::tools
