// axplan calibrate: measure a real or emulated cluster under mpirun and write a
// topology file in the planner's format (docs/validation.md).
//
//   mpirun -np 4 axplan calibrate --gpus-per-node 2 [--base perlmutter] [--output cluster.json]
//       [--model gpt-bench --batch-seqs 16]
//
// For every group size p and stride ip (ip * p dividing the world size) every rank joins
// the group of ranks {base + ip*j}; all-gather, reduce-scatter and all-reduce are timed
// at several sizes; latency and bandwidth are fitted per (ip, p) (bandwidth_fit.hpp).
// Groups inside a node fill the intra-node table; the ring over all ranks with ip = 1
// gives the inter-node bandwidth (eq. 10 with ip = 1). A ping-pong between ranks 0 and 1
// (same node) and 0 and gpus_per_node (next node) gives the point-to-point bandwidths.
// With --model, every rank times at once (as in training) each local matmul the
// model's layers run on any grid of this many GPUs (compute_model.hpp); the table and
// a fit t = overhead + flops / rate go into the file's "compute" object. Memory and
// peak FLOP/s are copied from --base. Rank 0 prints the fits and writes the file.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "axonn/planner/compute_model.hpp"

namespace axonn::tools {

// How `calibrate --model` times kernels on this rank (LibTorch, one thread; medians of
// `repeats` runs after a warm-up). Supplied by the axplan program when it is built with
// LibTorch (kernel_timer.hpp); empty otherwise.
struct KernelTimers {
  // seconds per call of one local matmul of this shape
  std::function<double(const planner::MatmulShape&, int repeats)> matmul;
  // seconds per element (forward, backward) of an element-wise operation on rows x width
  std::function<topo::ElementwiseCost(const std::string& op, int64_t rows, int64_t width, int repeats)> elementwise;
  explicit operator bool() const { return matmul && elementwise; }
};

struct CalibrateOptions {
  int gpus_per_node = 0;
  std::string base = "perlmutter";
  std::string name = "calibrated";
  std::string output = "calibrated_topology.json";
  std::vector<double> sizes_bytes = {1048576, 4194304, 16777216};  // full buffers, bytes
  int repeats = 3;
  std::string model;        // empty: no matmul timing
  int64_t batch_seqs = 0;   // global batch the model's shapes are taken for
  int matmul_repeats = 3;
};

// The distinct local matmul shapes of every layer of `model` on every grid of `gpus`
// GPUs without pipeline whose data-parallel size divides `batch_seqs` (one micro-batch).
std::vector<planner::MatmulShape> model_matmul_shapes(const std::string& model, int64_t gpus, int64_t batch_seqs);

// Initializes MPI if needed. Returns the exit code (2 for bad input).
int run_calibrate(const CalibrateOptions& o, const KernelTimers& timers, std::ostream& out, std::ostream& err);

}  // namespace axonn::tools
