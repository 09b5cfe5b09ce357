// What `axplan calibrate` measured on a cluster, before any fit: the records the
// runtime produces (axonn/runtime/calibration.hpp) and the planner turns into a
// topology file (axonn/planner/calibration.hpp). Plain data; units in the names.
//
// Example (one all-reduce over 4 ranks, 1 apart, with a full buffer of 4 MiB):
//   CollectiveTiming{CollectiveOp::AllReduce, /*ip=*/1, /*p=*/4, /*inside_node=*/true, 4194304.0, 3.1e-3};
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "axonn/topology/topology.hpp"

namespace axonn::topo {

enum class CollectiveOp { AllGather, ReduceScatter, AllReduce };

// The slowest member's median time of one collective over the group of `p` ranks,
// `ip` ranks apart, with a full (gathered / unscattered) buffer of `bytes`.
struct CollectiveTiming {
  CollectiveOp op = CollectiveOp::AllReduce;
  int64_t ip = 1, p = 2;
  bool inside_node = true;  // the group (and every copy of it) stays inside a node
  double bytes = 0;
  double seconds = 0;
};

// One-way time of a message of `bytes` between two ranks (half a ping-pong, median).
struct PointToPointTiming {
  bool inside_node = true;
  double bytes = 0;
  double seconds = 0;
};

// Every rank computes the same burst of matmuls, then a one-element all-reduce over
// its group of `p` consecutive ranks: the medians over ranks of the burst's time and
// of the all-reduce's (the wait for the group's last member plus its latency). Calibrate
// repeats the bursts in rounds at different times; each round is fitted alone.
struct SyncWaitTiming {
  int64_t p = 2;
  double compute_s = 0;
  double wait_s = 0;
  int64_t round = 0;  // 0-based, in the order calibrate ran the rounds
};

// One round of the waiting-share measurement (Topology::waiting_share): every rank
// runs the same burst of matmuls; then half the ranks run it again while the other half
// wait for a message from one of them, inside their node (across_nodes false: the odd
// ranks of each node wait) or from another node (the odd nodes wait). `ratio`: the
// computing half's median burst over every rank's median burst.
struct WaitingShareTiming {
  bool across_nodes = false;
  double ratio = 0;
  int64_t round = 0;  // 0-based
};

// One round of the latency measurement (Topology::collective_latency): pairs of ranks
// inside a node ({r, r + 1}) or across nodes ({r, r + gpus_per_node}) run one-element
// all-reduces back to back, every pair at once (loaded false), or half of the pairs
// while the ranks of the other half compute bursts of matmuls (loaded true: a step's
// small collectives run beside other ranks' compute). `seconds`: over the timing ranks,
// the median of each one's median all-reduce (2 ring steps).
struct LatencyTiming {
  bool across_nodes = false;
  bool loaded = false;
  double seconds = 0;
  int64_t round = 0;  // 0-based
};

// The operand of one element-wise measurement: `rows` x `width` elements (softmax:
// rows/width score matrices of width x width; attention_layout: `rows` tokens of
// `width` hidden elements in `heads` heads).
struct ElementwiseShape {
  int64_t rows = 0, width = 0;
  int64_t heads = 1;
};

// One round of the kernel timings. Calibrate times every kernel in several rounds
// spread over its run (between the collectives), since the rate the ranks get moves
// over minutes; the topology takes each kernel's median over the rounds. Each entry is
// a median over ranks, as in ClusterMeasurements::matmuls.
struct KernelRound {
  int64_t round = 0;                                   // 0-based, in the order calibrate ran them
  std::vector<double> matmul_s;                        // seconds, by shape, in ClusterMeasurements::matmuls' order
  std::map<std::string, ElementwiseCost> elementwise;  // by topo::elementwise_op_names()
};

struct ClusterMeasurements {
  int64_t world = 0, gpus_per_node = 0;
  std::vector<CollectiveTiming> collectives;
  std::vector<PointToPointTiming> point_to_point;
  std::vector<MatmulTiming> matmuls;                   // median over ranks, every rank busy at once
  std::map<std::string, ElementwiseCost> elementwise;  // by topo::elementwise_op_names(); may be empty
  // When not empty, the kernels' times by round: `matmuls` then names the shapes (their
  // seconds unused) and `elementwise` is unused.
  std::vector<KernelRound> kernel_rounds;
  // The same kernels timed in bf16 (mixed-precision plans' dtype), round by round beside
  // `kernel_rounds`; empty where calibrate timed fp32 only.
  std::vector<KernelRound> bf16_kernel_rounds;
  std::vector<SyncWaitTiming> sync_waits;              // may be empty
  std::vector<WaitingShareTiming> waiting_shares;      // may be empty
  std::vector<LatencyTiming> latencies;                // may be empty
  // The algorithms of the non-blocking collectives that the measured backend runs in
  // training (calibrate times the blocking rings above): a fact of the backend.
  NonblockingCollectives nonblocking;
  // The fewest host cores a rank has to itself: over the machines, the cores the
  // machine's ranks may run on over how many ranks it holds (Topology::cores_per_rank).
  // 0 = not measured.
  double cores_per_rank = 0;
};

}  // namespace axonn::topo
