// Measuring a cluster for `axplan calibrate` (docs/validation.md) with the MPI
// backend. Collective over `world`; every rank returns the same measurements.
//
// For every group size p and stride ip (ip * p dividing the world size) every rank
// joins the group {base + ip*j}; all-gather, reduce-scatter and all-reduce are timed
// at each size (the slowest member's median). They are the collectives the runtime
// issues, through the group's own communicator: its rings for the all-gather and the
// reduce-scatter (mpi_ring.hpp), and Open MPI's non-blocking all-reduce, which
// axonn::prefer_ring_collectives (MpiEnvironment) makes libnbc's ring. All move the
// bytes the model's ring formulas assume. (Open MPI's blocking all-reduce, timed until
// 2026-11-28, took 1.4 times the runtime's on 2 ranks at 4 MiB: docs/validation.md,
// "A core for every rank on the development machine".) A ping-pong between ranks 0 and 1 (same
// node) and 0 and gpus_per_node (next node) gives the point-to-point times. For each
// group with ip = 1, every rank computes bursts of matmuls and then all-reduces one
// element over its group: the wait for the group's last member (sync_waits), in
// `sync_wait_rounds` rounds, half before everything else and half after it (each burst
// size after a barrier, or with `sync_wait_loop`, many in a row). Last, in
// `waiting_share_rounds` rounds, half the ranks compute a burst while the other half
// wait for a message, polling as a pipeline stage does (waiting_shares). In
// `latency_rounds` rounds, pairs of ranks inside a node and across nodes time
// one-element all-reduces, alone and while the other half of the ranks compute
// (latencies). Kernels
// are timed by every rank at once (ranks of a node share its cores, as in training);
// each shape keeps the median over ranks of each rank's median (a rank descheduled
// for a long stretch is an outlier, not the rate the ranks get). They are timed in
// `kernel_rounds` rounds spread over the collectives (the first before them, the last
// after them; ClusterMeasurements::kernel_rounds), since the rate the ranks get moves
// over minutes: the planner takes each kernel's median over the rounds and prints
// the rounds' spread.
//
// Example:
//   CalibrationRequest r;  r.gpus_per_node = 2;
//   topo::ClusterMeasurements m = measure_cluster(*world, r);
#pragma once

#include <map>
#include <string>
#include <vector>

#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/topology/measurements.hpp"

namespace axonn::runtime {

struct CalibrationRequest {
  int64_t gpus_per_node = 1;
  std::vector<double> sizes_bytes = {1048576, 4194304, 16777216};  // full buffers, bytes
  int repeats = 3;                                                  // timed runs per size (after a warm-up)
  std::vector<topo::MatmulTiming> matmuls;                          // shapes to time (seconds ignored)
  std::map<std::string, topo::ElementwiseShape> elementwise;        // operations to time
  int kernel_repeats = 3;
  int kernel_rounds = 3;  // rounds of every kernel timing (>= 1 when there are kernels)
  bool bf16_kernels = true;  // each round also times the kernels in bf16 (ClusterMeasurements::bf16_kernel_rounds)
  std::vector<int> sync_wait_bursts = {8, 32, 128};  // 128^3 matmuls per burst; empty: no sync waits
  int sync_wait_rounds = 20;                         // rounds of every burst size (>= 1), each fitted alone
  // 0: each burst size runs `repeats` times after a barrier, each rank's median taken, then the
  // median over ranks. N > 0: each runs N times back to back with no barrier between (after a
  // warm-up), as training's layers follow one another, each rank's mean taken, then the mean
  // over ranks: the descheduled stretches count as they do in a step. 8 by default since
  // 2026-12-02 (docs/validation.md, "The sync wait's loop as the default"): its calibrations
  // read 0.44-0.55 for groups of 8 in twelve calibrations; the barrier-separated medians 0.07-0.95.
  int sync_wait_loop = 8;
  int waiting_share_burst = 512;                     // 128^3 matmuls per burst of the waiting share (128 until 2026-12-01)
  int waiting_share_rounds = 20;                     // its rounds; 0: not measured
  int latency_rounds = 10;                           // rounds of the small all-reduces (latencies); 0: none
  int latency_calls = 30;                            // timed all-reduces per pair and round (after 3 warm-ups)
  bool kernels_only = false;  // time the kernels (and count the cores per rank) only: a probe of the machine's rate
};

topo::ClusterMeasurements measure_cluster(MpiCommunicator& world, const CalibrationRequest& r);

}  // namespace axonn::runtime
