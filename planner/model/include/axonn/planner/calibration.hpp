// From measurements to a topology file (`axplan calibrate`, docs/validation.md): pure
// functions over what the runtime measured (axonn/topology/measurements.hpp).
//
//  - every (ip, p) group: latency and bandwidth fitted to its all-gathers,
//    reduce-scatters and all-reduces (bandwidth_fit.hpp); groups inside a node fill
//    the intra-node table; the ring over all ranks with ip = 1 gives the inter-node
//    bandwidth (eq. 10 with ip = 1); the median latency becomes collective_latency_s
//    unless the latency rounds below measured it;
//  - latency rounds (ClusterMeasurements::latencies): per ring step, half the median
//    loaded one-element all-reduce of pairs inside a node (intra_node_collective_latency_s)
//    and across nodes (collective_latency_s), where measured (fit_latency);
//  - point-to-point pairs inside a node and across nodes: their own fits;
//  - matmuls: the table of measured shapes plus a fit t = overhead + flops / rate (or,
//    when the times do not grow with FLOPs, the aggregate rate);
//  - element-wise costs: copied;
//  - kernels timed in rounds (ClusterMeasurements::kernel_rounds): each matmul shape's
//    and each element-wise cost's median over the rounds; each round's sums (the
//    shapes' seconds, the operations' forward + backward seconds per element) and their
//    spread, (max - min) / median, are returned and appended to the description;
//  - sync waits, per group size and round: wait = alpha + fraction * compute fitted to
//    the round's bursts (fraction = 1 / the fit's beta); a round whose waits do not
//    grow with the burst has fraction 0 and a note. The mean over the rounds is written
//    as the topology's sync_wait (a step's waits add up, so their expected sum is the
//    mean fraction's), and the means of the rounds run at the start and at the end and
//    the rounds' range are appended to its description. Rounds in a row are alike (the
//    wait changes over seconds), so their standard error would understate the spread.
// Memory and peak FLOP/s come from the base topology.
//
// Example:
//   CalibratedCluster c = calibrated_topology(load_topology("perlmutter"), measured, "mine", "measured on ...");
//   c.topology.inter_node_bandwidth_bytes_per_s;   // the ring over all ranks
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/planner/bandwidth_fit.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/topology/measurements.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

struct GroupFit {
  int64_t ip = 1, p = 2;
  bool inside_node = true;
  BandwidthFit fit;
};

// One round's sync-wait fit of groups of p ranks: fit.alpha_s the wait after no compute
// (the all-reduce's own latency), 1 / fit.beta_bytes_per_s the fraction.
struct SyncWaitRoundFit {
  int64_t round = 0;
  std::optional<BandwidthFit> fit;
  std::string note;  // why there is no fit (then the fraction is 0)
  double fraction() const { return fit ? 1.0 / fit->beta_bytes_per_s : 0.0; }
};

// The sync wait of groups of p ranks over every round calibrate ran.
struct SyncWaitFit {
  int64_t p = 2;
  std::vector<SyncWaitRoundFit> rounds;  // by round
  double fraction = 0;                   // the mean of the rounds' fractions (s of wait per s of compute)
  // The mean fractions of the rounds run at the start (round < n/2 of n rounds, as
  // calibrate orders them) and at the end; with one round, both are its fraction.
  double start_fraction = 0, end_fraction = 0;
  double lowest = 0, highest = 0;  // the rounds' smallest and largest fraction
};

// One kernel round's sums: every matmul shape once (s), and every element-wise
// operation's forward plus backward cost (s per element).
struct KernelRoundSums {
  int64_t round = 0;
  double matmul_s = 0;
  double elementwise_s_per_element = 0;
};

// The waiting share of one kind of wait (Topology::waiting_share): w = 2 r - 1 from the
// rounds' median ratio r (half the ranks computing: each takes C / (N/2 + w N/2) of C
// cores against C / N with all computing), clamped to [0, 1]; and the rounds' range of w.
struct WaitingShareFit {
  bool across_nodes = false;
  double share = 1, lowest = 1, highest = 1;
  int64_t rounds = 0;
};
WaitingShareFit fit_waiting_share(const std::vector<double>& ratios, bool across_nodes);

// The latency of groups inside a node or across nodes (Topology::collective_latency),
// per ring step: half of a pair's one-element all-reduce (2 ring steps), the median over
// the rounds, timed while half of the ranks compute (`loaded`, the value written: a
// step's collectives run beside other ranks' compute) and with every pair at once
// (`alone`, printed beside it); and the loaded rounds' range.
struct LatencyFit {
  bool across_nodes = false;
  double loaded_s = 0, alone_s = 0;    // per ring step
  double lowest_s = 0, highest_s = 0;  // the loaded rounds', per ring step
  int64_t rounds = 0;
};
// Throws InternalError without loaded rounds of that placement.
LatencyFit fit_latency(const std::vector<topo::LatencyTiming>& rounds, bool across_nodes);

// How the kernels of one dtype were fitted and how their rounds spread.
struct KernelFits {
  std::optional<BandwidthFit> matmul;  // alpha = overhead (s), beta = FLOP/s
  std::string matmul_note;             // why there is no matmul fit, when there is none
  std::vector<KernelRoundSums> kernel_rounds;  // in calibrate's order; empty: one round, not kept apart
  // The spread of the rounds' sums: (max - min) / median (run_spread; 0 for one round).
  double matmul_round_spread = 0, elementwise_round_spread = 0;
};

// The fp32 kernels' fits are the cluster's own (topology.compute); bf16's, where timed,
// are in `bf16` (topology.compute_bf16).
struct CalibratedCluster : KernelFits {
  topo::Topology topology;
  std::vector<GroupFit> groups;  // by (ip, p)
  std::optional<BandwidthFit> point_to_point_intra, point_to_point_inter;
  std::vector<SyncWaitFit> sync_waits; // by p, ascending
  std::vector<WaitingShareFit> waiting_shares;  // inside a node, then across nodes, where measured
  std::vector<LatencyFit> latencies;            // inside a node, then across nodes, where measured
  std::optional<KernelFits> bf16;
};

// Throws InputError when no ring spans the nodes (one node only), InternalError when a
// kernel round does not time the same kernels as the others.
CalibratedCluster calibrated_topology(const topo::Topology& base, const topo::ClusterMeasurements& m,
                                      const std::string& name, const std::string& description);

// The kernels alone (`axplan calibrate --kernels-only`, a probe of the machine's rate
// that `axplan validate --kernel-probes` runs around a sweep): `base` with the compute
// part measured in `m` (as calibrated_topology makes it), and the node layout and host
// cores per rank where `m` has them; the collectives are base's, not measured (base's
// intra-node table is dropped where the node layout differs from base's).
CalibratedCluster kernel_topology(const topo::Topology& base, const topo::ClusterMeasurements& m,
                                  const std::string& name, const std::string& description);

// How a probe's kernel times compare with a topology's: the sums over the matmul
// shapes both tables hold (seconds) and over the element-wise operations both hold
// (forward + backward seconds per element), probe over topology; 0 where nothing matched.
struct KernelTimeRatio {
  size_t shapes = 0, operations = 0;  // matched
  double matmul = 0, elementwise = 0;
};
KernelTimeRatio kernel_time_ratio(const topo::ComputeThroughput& topology, const topo::ComputeThroughput& probe);

// The distinct local matmul shapes of every layer of `m` on every grid of `gpus` GPUs
// (AxoNN's 3D first, then the sequence, 2d and 3d grids) without a pipeline whose model
// replicas divide `batch_seqs` (one micro-batch), in first-seen order. Throws InputError for batch_seqs < 1.
std::vector<MatmulShape> model_matmul_shapes(const model::ModelDescription& m, int64_t gpus, int64_t batch_seqs);

// The operand of each element-wise operation calibrate times for `m`: about 2^20
// elements at the model's widths (bias and GELU: ffn; layer norm and residual: hidden;
// the split layer norm: hidden / 2, the local columns of the smallest group; softmax:
// seq_len; cross-entropy: vocab; Adam: 1024).
std::map<std::string, topo::ElementwiseShape> elementwise_shapes(const model::ModelDescription& m);

}  // namespace axonn::planner
