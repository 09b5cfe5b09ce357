// axplan-calibrate: measure a real or emulated cluster under mpirun and write a
// topology file in the planner's format (docs/validation.md). Reached as
// `axplan calibrate ...` (axplan runs this sibling program with the same flags).
//
//   mpirun -np 4 axplan calibrate --gpus-per-node 2 [--base perlmutter] [--output cluster.json]
//       [--model gpt-bench --batch-seqs 16]
//
// The measuring is the runtime's (axonn/runtime/calibration.hpp), the fitting the
// planner's (axonn/planner/calibration.hpp); this program parses the flags, prints
// the fits on rank 0 and writes the file. Bad input exits 2 on every rank (rank 0
// prints it); a failure of one rank ends every rank.
#include <ATen/Parallel.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/load_average.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/runtime/calibration.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/machine_cores.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;

namespace {

struct Options {
  int gpus_per_node = 0;
  std::string base = "perlmutter", name = "calibrated", output = "calibrated_topology.json";
  int repeats = 3;
  std::string model;  // empty: no kernel timing
  int64_t batch_seqs = 0;
  int matmul_repeats = 3;
  int kernel_rounds = runtime::CalibrationRequest{}.kernel_rounds;
  std::string kernel_dtypes = "fp32,bf16";
  bool kernels_only = false;
  int sync_wait_rounds = runtime::CalibrationRequest{}.sync_wait_rounds;
  int sync_wait_loop = runtime::CalibrationRequest{}.sync_wait_loop;
  int waiting_share_rounds = runtime::CalibrationRequest{}.waiting_share_rounds;
  int waiting_share_burst = runtime::CalibrationRequest{}.waiting_share_burst;
  int latency_rounds = runtime::CalibrationRequest{}.latency_rounds;
  std::string wait = "auto";
};

std::string fit_row(const std::string& what, const planner::BandwidthFit& f, double scale, const char* unit) {
  return fmt::format("{:<28} {:>10.3f} {}  overhead {:>8.1f} us  R^2 {:.3f}  max rel. err {:.1f}%\n", what,
                     f.beta_bytes_per_s / scale, unit, f.alpha_s * 1e6, f.r2, 100 * f.max_relative_error);
}

// The collectives' and the point-to-point fits.
void print_collective_fits(std::ostream& out, const planner::CalibratedCluster& c) {
  fmt::print(out, "{:>4} {:>4}  {:>12}  {:>14}  {:>10}  {:>6}  {}\n", "ip", "p", "where", "beta (GB/s)", "alpha (us)",
             "R^2", "max rel. err");
  for (const auto& g : c.groups)
    fmt::print(out, "{:>4} {:>4}  {:>12}  {:>14.3f}  {:>10.1f}  {:>6.3f}  {:.1f}%\n", g.ip, g.p,
               g.inside_node ? "intra-node" : "across nodes", g.fit.beta_bytes_per_s / 1e9, g.fit.alpha_s * 1e6,
               g.fit.r2, 100 * g.fit.max_relative_error);
  out << "\n";
  if (c.point_to_point_intra) out << fit_row("point-to-point intra-node", *c.point_to_point_intra, 1e9, "GB/s");
  if (c.point_to_point_inter) out << fit_row("point-to-point across nodes", *c.point_to_point_inter, 1e9, "GB/s");
}

// One dtype's element-wise costs, matmul fit and kernel rounds.
void print_kernel_fits(std::ostream& out, const planner::KernelFits& c, const topo::ComputeThroughput& compute,
                       const Options& o, const std::string& dtype) {
  for (const auto& [op, cost] : compute.elementwise)
    fmt::print(out, "{} element-wise {:<16} forward {:>7.2f} ns/element  backward {:>7.2f} ns/element\n", dtype, op,
               cost.forward_s_per_element * 1e9, cost.backward_s_per_element * 1e9);
  const size_t shapes = compute.matmul_table.size();
  if (c.matmul)
    out << fit_row(fmt::format("{} matmul ({} shapes of {})", dtype, shapes, o.model), *c.matmul, 1e9, "GFLOP/s");
  else if (shapes > 0)
    fmt::print(out, "{} matmul ({} shapes of {}): no fit ({}); aggregate {:.3f} GFLOP/s\n", dtype, shapes, o.model,
               c.matmul_note, compute.matmul_flops_per_s / 1e9);
  if (c.kernel_rounds.size() > 1) {
    fmt::print(out,
               "{} kernels timed in {} rounds, each kernel's median written; the rounds' sums (matmuls: every shape once; "
               "element-wise: forward + backward of every operation) spread by {:.1f}% and {:.1f}% ((max - min) / median)\n",
               dtype, c.kernel_rounds.size(), 100 * c.matmul_round_spread, 100 * c.elementwise_round_spread);
    for (const auto& r : c.kernel_rounds)
      fmt::print(out, "  kernel round {}: matmuls {:.3f} ms, element-wise {:.2f} ns/element\n", r.round, 1e3 * r.matmul_s,
                 r.elementwise_s_per_element * 1e9);
  }
}

// Every dtype's kernels: fp32's (the topology's compute), then bf16's where timed.
void print_kernel_fits(std::ostream& out, const planner::CalibratedCluster& c, const Options& o) {
  print_kernel_fits(out, c, c.topology.compute, o, "fp32");
  if (c.bf16 && c.topology.compute_bf16) print_kernel_fits(out, *c.bf16, *c.topology.compute_bf16, o, "bf16");
}

void print_fits(std::ostream& out, const planner::CalibratedCluster& c, const Options& o, int64_t world) {
  if (o.kernels_only) {
    print_kernel_fits(out, c, o);
    fmt::print(out, "kernels only: collectives, point-to-point and sync waits not measured (from '{}'); wrote {}\n",
               o.base, o.output);
    return;
  }
  print_collective_fits(out, c);
  print_kernel_fits(out, c, o);
  const std::string runs = o.sync_wait_loop > 0
                               ? fmt::format("each burst {} times in a row, means", o.sync_wait_loop)
                               : fmt::format("each burst {} time{} after a barrier each, medians", o.repeats,
                                             o.repeats == 1 ? "" : "s");
  for (const auto& w : c.sync_waits) {
    if (w.rounds.size() == 1)
      fmt::print(out, "sync wait over {} ranks: {:.3f} s per s of compute since the last collective (one round, {})\n",
                 w.p, w.fraction, runs);
    else
      fmt::print(out, "sync wait over {} ranks: {:.3f} s per s of compute since the last collective (mean of {} rounds, "
                 "{}; first half {:.3f}, second half {:.3f}; rounds {:.3f} to {:.3f})\n",
                 w.p, w.fraction, w.rounds.size(), runs, w.start_fraction, w.end_fraction, w.lowest, w.highest);
    for (const auto& r : w.rounds)
      if (r.fit)
        fmt::print(out, "  round {}: {:.3f}, + {:.1f} us  R^2 {:.3f}  max rel. err {:.1f}%\n", r.round, r.fraction(),
                   r.fit->alpha_s * 1e6, r.fit->r2, 100 * r.fit->max_relative_error);
      else
        fmt::print(out, "  round {}: no fit ({}); 0\n", r.round, r.note);
  }
  for (const auto& w : c.waiting_shares)
    fmt::print(out, "a rank waiting for a message {}: takes {:.2f} of a computing rank's cores (median of {} rounds; "
               "rounds {:.2f} to {:.2f})\n",
               w.across_nodes ? "from another node" : "from its own node", w.share, w.rounds, w.lowest, w.highest);
  for (const auto& l : c.latencies)
    fmt::print(out, "latency per ring step {}: {:.1f} us beside other ranks' compute, {:.1f} us alone (pairs' "
               "one-element all-reduces, median of {} rounds; loaded rounds {:.1f} to {:.1f} us)\n",
               l.across_nodes ? "across nodes" : "inside a node", 1e6 * l.loaded_s, 1e6 * l.alone_s, l.rounds,
               1e6 * l.lowest_s, 1e6 * l.highest_s);
  if (c.topology.cores_per_rank > 0)
    fmt::print(out, "host cores per rank: {:.3f}{}\n", c.topology.cores_per_rank,
               c.topology.ranks_time_sliced() ? " (time-sliced: the model staggers other replicas' and stages' tensor rings across nodes)" : "");
  if (!c.topology.nonblocking.rings())
    fmt::print(out, "non-blocking all-gather: linear (the runtime's MPI backend has no ring; the model scales its "
                    "time across nodes by the bytes on a node's link)\n");
  fmt::print(out, "inter-node bandwidth {:.3f} GB/s (ring over all {} ranks), latency {:.1f} us{}; wrote {}\n",
             c.topology.inter_node_bandwidth_bytes_per_s / 1e9, world, c.topology.collective_latency_s * 1e6,
             c.topology.intra_node_collective_latency_s >= 0
                 ? fmt::format(" (inside a node {:.1f} us)", c.topology.intra_node_collective_latency_s * 1e6)
                 : std::string(),
             o.output);
}

}  // namespace

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  const int rank = world.rank();
  Options o;
  CLI::App app{"axplan calibrate: measure collectives (and a model's kernels) under mpirun; write a topology file"};
  app.name("axplan calibrate");
  app.add_option("--gpus-per-node", o.gpus_per_node, "ranks per node")->required()->check(CLI::PositiveNumber);
  app.add_option("--base", o.base, "topology giving memory and peak FLOP/s")->capture_default_str();
  app.add_option("--name", o.name, "name of the measured cluster")->capture_default_str();
  app.add_option("--output,-o", o.output, "topology file to write")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed repetitions per size")->capture_default_str()->check(CLI::PositiveNumber);
  auto* model_opt = app.add_option("--model", o.model, "also time the local matmuls and element-wise work of this model");
  app.add_option("--batch-seqs", o.batch_seqs, "global batch (sequences) the matmul shapes are taken for")
      ->check(CLI::PositiveNumber)
      ->needs(model_opt);
  app.add_option("--sync-wait-rounds", o.sync_wait_rounds,
                 "rounds of the sync-wait bursts (half at the start, half at the end); their mean is written")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--sync-wait-loop", o.sync_wait_loop,
                 "runs of each sync-wait burst back to back with no barrier between, means taken (0: --repeats runs, "
                 "each after a barrier, medians taken, the default until 2026-12-02)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app.add_option("--waiting-share-rounds", o.waiting_share_rounds,
                 "rounds of half the ranks computing while the other half wait for a message (a waiting rank's share "
                 "of the cores, for the pipeline model); 0: not measured")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app.add_option("--waiting-share-burst", o.waiting_share_burst,
                 "matrix products (128 x 128) in each computing rank's burst of a waiting-share round")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--latency-rounds", o.latency_rounds,
                 "rounds of small all-reduces over pairs of ranks, inside a node and across nodes, alone and beside "
                 "other ranks' compute (the latency per ring step); 0: latency from the bandwidth fits")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app.add_option("--wait", o.wait,
                 "how a waiting rank passes the time between polls, as axrun --wait (the waiting share depends on it; "
                 "auto: sleep where the ranks have less than a core each)")
      ->check(CLI::IsMember({"auto", "yield", "sleep"}))
      ->capture_default_str();
  app.add_option("--matmul-repeats", o.matmul_repeats, "timed runs per kernel shape")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--kernels-only", o.kernels_only,
               "time the model's kernels only (a probe of the machine's rate; axplan validate --kernel-probes): the "
               "written topology has --base's collectives")
      ->needs(model_opt);
  app.add_option("--kernel-rounds", o.kernel_rounds,
                 "rounds of the kernel timings, spread over the collectives; each kernel's median is written")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--kernel-dtypes", o.kernel_dtypes,
                 "the dtypes the kernels are timed in: fp32 (validate's plans on CPU), and bf16 (mixed precision, "
                 "axplan plan's default: the topology's compute_bf16)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp32,bf16"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : e.get_exit_code();  // rank 0 prints the message or the help
    return code == 0 ? 0 : kExitUsage;
  }
  runtime::set_compute_threads(1);
  runtime::set_wait_policy(o.wait == "auto" ? runtime::automatic_wait_policy(runtime::measure_cores_per_rank(world), 1)
                                            : runtime::parse_wait_policy(o.wait, "--wait"));
  runtime::CalibrationRequest request;
  topo::Topology base;
  try {  // input errors: every rank finds them alike, rank 0 says so
    if (world.size() < 2)
      throw InputError("calibrate", "only 1 rank", "MPI world", "at least 2 ranks: run under mpirun -np N");
    if (world.size() % o.gpus_per_node != 0)
      throw InputError("calibrate", fmt::format("{} ranks do not fill nodes of {} GPUs", world.size(), o.gpus_per_node),
                       "--gpus-per-node", "a divisor of the number of ranks");
    base = topo::load_topology(o.base);
    request.gpus_per_node = o.gpus_per_node;
    request.repeats = o.repeats;
    request.kernel_repeats = o.matmul_repeats;
    request.kernel_rounds = o.kernel_rounds;
    request.kernels_only = o.kernels_only;
    request.bf16_kernels = o.kernel_dtypes == "fp32,bf16";
    request.sync_wait_rounds = o.sync_wait_rounds;
    request.sync_wait_loop = o.sync_wait_loop;
    request.waiting_share_rounds = o.waiting_share_rounds;
    request.waiting_share_burst = o.waiting_share_burst;
    request.latency_rounds = o.latency_rounds;
    if (!o.model.empty()) {
      const model::ModelDescription m = model::load_model(o.model);
      for (const auto& s : planner::model_matmul_shapes(m, world.size(), o.batch_seqs))
        request.matmuls.push_back({s.m, s.k, s.n, s.batch, 0.0});
      request.elementwise = planner::elementwise_shapes(m);
    }
  } catch (const Error& e) {
    if (rank == 0) std::cerr << "axplan: " << e.what() << "\n";
    return exit_code(e);
  }
  try {
    const std::optional<LoadAverage> load_before = read_load_average();  // before this job loads the machine
    const topo::ClusterMeasurements measured = runtime::measure_cluster(world, request);
    if (rank == 0) {
      const std::string description = fmt::format(
          "measured by axplan calibrate{} on {} ranks ({} per node, waiting ranks {} between polls){}; {} from '{}'; {} "
          "at the start",
          o.kernels_only ? " --kernels-only" : "", world.size(), o.gpus_per_node, runtime::to_string(runtime::wait_policy()),
          o.model.empty() ? "" : fmt::format(", matmuls of {} at {} sequences per step", o.model, o.batch_seqs),
          o.kernels_only ? "collectives, memory and peak FLOP/s" : "memory and peak FLOP/s", o.base,
          load_before ? describe(*load_before) : "machine load unknown");
      const planner::CalibratedCluster c = o.kernels_only
                                               ? planner::kernel_topology(base, measured, o.name, description)
                                               : planner::calibrated_topology(base, measured, o.name, description);
      write_file_atomically(o.output, topo::topology_to_json(c.topology).dump(2) + "\n", "calibrate");
      print_fits(std::cout, c, o, world.size());
    }
  } catch (const Error& e) {
    runtime::abort_job("calibrate failed: " + std::string(e.what()), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job("calibrate failed: " + std::string(e.what()), kExitInternal);
  }
  return 0;
}
