// A cluster as the planner sees it: nodes of identical GPUs, the bandwidth of a
// collective inside a node (by group placement) and between nodes.
//
// Units are in the names: bytes, bytes/s, FLOP/s, seconds.
//
// Example (Perlmutter, the 4D paper's measured numbers):
//   Topology t;  t.gpus_per_node = 4;  t.inter_node_bandwidth_bytes_per_s = 59.52e9;
//   t.intra_node_bandwidth_bytes_per_s = 76e9;            // fallback
//   t.intra_node_table = {{1, 2, 76e9}, {1, 4, 225e9}, {2, 2, 76e9}};
//   t.intra_bandwidth(1, 4);   // 225e9 bytes/s: a group of 4 with unit stride
//   t.intra_bandwidth(4, 1);   // 76e9 bytes/s: not in the table, the fallback
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace axonn::topo {

// Measured bandwidth of a ring collective over a group of p GPUs of one node whose
// members are ip ranks apart (ip = product of the sizes of the groups placed inside it).
struct IntraBandwidthEntry {
  int64_t ip = 1;
  int64_t p = 1;
  double bytes_per_s = 0;
};

// One measured local matrix multiply: `batch` products of an (m x k) by a (k x n)
// matrix took `seconds` (median, with every rank of the node busy at once).
struct MatmulTiming {
  int64_t m = 0, k = 0, n = 0, batch = 1;
  double seconds = 0;
};

// Seconds per element of one element-wise operation (forward and backward), measured
// with every rank busy at once. The operations, by name (docs/model.md section 7):
//   bias           y = x + b                          (elements of the output)
//   layer_norm     layer norm over the last dimension (elements of the input): LibTorch's
//                  fused kernel, which the runtime calls where the hidden dimension is whole
//   layer_norm_split the same where the hidden dimension is split over a group (X for
//                  AxoNN 3D and 3d, Y for 2d and 2d-broadcast): the runtime's arithmetic
//                  of runtime/split_layer_norm.hpp,
//                  its all-reduces aside (elements of the local input); a topology without
//                  it charges its roofline bytes there, or without a memory bandwidth
//                  layer_norm's rates
//   gelu           GELU                               (elements of the output)
//   residual       h + y                              (elements of the output)
//   softmax        scale, causal mask, softmax        (elements of the score matrix)
//   attention_layout the attention's copies between the token and the head layouts:
//                  q, k and v cut from the qkv output and folded to heads for the
//                  products, the context folded back, and their gradients (the slices'
//                  backward included) (elements of one of q, k, v)
//   cross_entropy  log-softmax and NLL                (elements of the logits)
//   adam           one Adam update                    (parameter elements; forward only)
//   grad_accumulate a layer's weight gradient added into its gradient buffer, once per
//                  backward pass (parameter elements; forward only): the runtime's
//                  accumulation over micro-batches, as Megatron-LM's main_grad hooks
//                  (fp32 += half) did in 2021; a runtime that fuses it into the weight-
//                  gradient product sets it to 0
struct ElementwiseCost {
  double forward_s_per_element = 0;
  double backward_s_per_element = 0;
};
inline const std::vector<std::string>& elementwise_op_names() {
  static const std::vector<std::string> names = {"bias",     "layer_norm",      "layer_norm_split",
                                                 "gelu",     "residual",        "softmax",
                                                 "attention_layout", "cross_entropy", "adam",
                                                 "grad_accumulate"};
  return names;
}
// Operations that act on parameters once per step or pass, not on activations: they
// have no backward (adam, grad_accumulate).
inline bool elementwise_forward_only(const std::string& op) { return op == "adam" || op == "grad_accumulate"; }

// What one GPU (here: one rank) computes per second, as `axplan calibrate` measures it
// (CPU ranks) or `axplan fit-published` fits to published runs (GPUs). Absent from a
// file: every matmul runs at peak_flops_per_s with no fixed cost, and element-wise work
// costs nothing.
//
// memory_bytes_per_s makes it a roofline (docs/model.md section 7): a matmul takes at
// least its half-precision operands and result over the GPU's memory, and an
// element-wise operation with no measured entry costs the bytes it moves over it.
struct ComputeThroughput {
  double matmul_flops_per_s = 0;           // fitted sustained rate; 0 = peak_flops_per_s
  double matmul_overhead_s = 0;            // fitted fixed cost of one matmul call, seconds
  double memory_bytes_per_s = 0;           // GPU memory (HBM) bandwidth; 0 = not modeled
  std::vector<MatmulTiming> matmul_table;  // measured shapes, used where they match exactly
  std::map<std::string, ElementwiseCost> elementwise;  // by operation name (above)
};

// Point-to-point (send/receive) bandwidth between two GPUs, bytes/s; 0 = not measured
// (the pipeline then uses the ring bandwidth of its group).
struct PointToPointBandwidth {
  double intra_node_bytes_per_s = 0;
  double inter_node_bytes_per_s = 0;
};

// The wait of a blocking collective for the last member of its group, as a fraction of
// the compute each member did since the group's previous collective (docs/model.md
// section 8). On ranks that share cores (an emulated cluster), equal work ends at
// different times, and the ranks already waiting poll and take cores from the rest;
// `axplan calibrate` measures it per group size. 0 on dedicated GPUs.
//
// Example: {4, 0.25}: 4 ranks that each computed 10 ms since their last collective
// wait 2.5 ms more in the next one.
struct SyncWaitEntry {
  int64_t ranks = 2;
  double fraction = 0;
};

// The algorithm of the non-blocking all-gather the runtime issues (docs/model.md
// section 1). NCCL's is a ring (the default). Open MPI 4.1's non-blocking collectives
// (coll/libnbc, what the runtime's MPI backend runs) have no ring all-gather: the
// default sends every member's chunk straight to every other member (linear), and the
// other choice, recursive doubling, moves as many bytes between two nodes. Across nodes that puts m (p - m) / p of
// the buffer on a node's link (m of the p members on the node) where a ring puts
// (p - 1) / p: 16/7 as much for 8 members on 2 nodes of 4.
enum class AllGatherAlgorithm : uint8_t { Ring, Linear };
struct NonblockingCollectives {
  AllGatherAlgorithm all_gather = AllGatherAlgorithm::Ring;
  bool rings() const { return all_gather == AllGatherAlgorithm::Ring; }
};

// What a rank that waits for a pipeline message still takes of its machine's cores, as a
// fraction of what a rank that computes takes, by where the message comes from
// (docs/model.md section 10, "Waiting stages lend their cores"): 0 = nothing (it
// sleeps), 1 = as much (it polls as hard as it computes). `axplan calibrate` measures
// it on time-sliced ranks: half the ranks compute while the other half wait for a
// message from a rank of their own node (intra_node) or of another node (inter_node).
// -1 = not measured, taken as 1 (nothing lent).
//
// Example: {intra_node 0.2, inter_node 1}: of 8 ranks on 2 cores, 4 computing while 4
// wait inside their node each run at 2 / (4 + 0.8) cores, 1.67x their rate with all 8
// computing; while 4 wait across nodes, at 2 / 8 cores, their rate with all 8 computing.
struct WaitingRankShare {
  double intra_node = -1, inter_node = -1;
  bool measured() const { return intra_node >= 0 || inter_node >= 0; }
  double of(bool across_nodes) const {
    const double w = across_nodes ? inter_node : intra_node;
    return w >= 0 ? w : 1.0;
  }
};

struct Topology {
  std::string name;
  std::string description;
  int64_t gpus_per_node = 0;
  int64_t num_nodes = 0;
  int64_t gpu_memory_bytes = 0;
  double peak_flops_per_s = 0;                  // half precision, per GPU
  double intra_node_bandwidth_bytes_per_s = 0;  // used where the table has no (ip, p) entry
  std::vector<IntraBandwidthEntry> intra_node_table;
  double inter_node_bandwidth_bytes_per_s = 0;  // between one pair of nodes, bidirectional
  double collective_latency_s = 0;              // alpha per ring step; 0 = paper's Assumption 3
  // Alpha per ring step of a group that stays inside one node, seconds; < 0: not set, and
  // collective_latency_s holds for every group. Where set, collective_latency_s is the
  // latency of groups that cross nodes (docs/model.md section 1).
  double intra_node_collective_latency_s = -1;
  // A fixed cost of each blocking collective of a tensor-parallel group that the model
  // has (the ring model aside), seconds; 0 = none. Collectives on an emulated cluster
  // whose ranks share cores cost more during training than calibrate's lone ones, for a
  // reason not known; this is fitted to a validation sweep (docs/validation.md), added
  // to the sync wait once per call, the small collectives' calls included.
  double collective_call_s = 0;
  double host_link_bytes_per_s = 0;             // one GPU to its host memory, one direction; 0 = not modeled
  ComputeThroughput compute;                    // optional "compute" object
  // Optional "compute_bf16": the same kernels timed in bf16, which mixed-precision plans
  // run (calibrate on CPU ranks, where LibTorch's bf16 products take other kernels at
  // another rate). Absent: `compute` serves every precision (a GPU's fit is its
  // half-precision rate already).
  std::optional<ComputeThroughput> compute_bf16;
  // The compute of a plan whose weights and activations take `bytes_per_element` bytes
  // (plan::Precision::compute_bytes): compute_bf16 for 2 where present, else compute.
  const ComputeThroughput& compute_for(int64_t bytes_per_element) const {
    return bytes_per_element == 2 && compute_bf16 ? *compute_bf16 : compute;
  }
  PointToPointBandwidth point_to_point;         // optional "point_to_point_bytes_per_s"
  std::vector<SyncWaitEntry> sync_wait;         // optional "sync_wait"; by ranks, ascending
  NonblockingCollectives nonblocking;           // optional "nonblocking_collectives"; rings
  // The host cores each rank has to itself, `axplan calibrate`'s count: the cores of its
  // machine over the ranks on it; 0 = not measured (each rank taken to run on its own
  // cores, as a GPU's host process does). Below 1 the ranks are time-sliced (the
  // emulated cluster: 8 ranks on 2 cores), so the process groups drift out of step and
  // their rings cross a node's link at different times (docs/model.md
  // section 2, "Tensor rings out of step").
  double cores_per_rank = 0;
  WaitingRankShare waiting_share;  // optional "waiting_rank_share"; used where time-sliced
  bool ranks_time_sliced() const { return cores_per_rank > 0 && cores_per_rank < 1; }

  int64_t total_gpus() const { return gpus_per_node * num_nodes; }

  // Alpha per ring step of a group inside one node or across nodes, seconds.
  double collective_latency(bool inside_node) const {
    return inside_node && intra_node_collective_latency_s >= 0 ? intra_node_collective_latency_s : collective_latency_s;
  }

  // Bandwidth of a ring inside one node (bytes/s): the table's (ip, p) entry, else
  // the scalar fallback.
  double intra_bandwidth(int64_t ip, int64_t p) const {
    for (const auto& e : intra_node_table)
      if (e.ip == ip && e.p == p) return e.bytes_per_s;
    return intra_node_bandwidth_bytes_per_s;
  }

  // The sync-wait fraction of a group of `ranks`: its entry, else that of the largest
  // group below it, else 0 (also for one rank).
  double sync_wait_fraction(int64_t ranks) const {
    double f = 0;
    int64_t best = 1;
    for (const auto& e : sync_wait)
      if (e.ranks <= ranks && e.ranks > best) best = e.ranks, f = e.fraction;
    return ranks > 1 ? f : 0.0;
  }
};

}  // namespace axonn::topo
