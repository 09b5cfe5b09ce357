// axplan calibrate; see calibrate.hpp.
#include "calibrate.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "axonn/common/error.hpp"
#include "axonn/common/ring_collectives.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/bandwidth_fit.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::tools {
namespace {

// MPI calls here are few and outside the runtime; a failure ends the calibration.
void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw Error("calibrate", std::string(call) + " failed", "MPI", "MPI_SUCCESS");
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

enum class Op { AllGather, ReduceScatter, AllReduce };

// The slowest member's median time of `op` over `comm` with a full buffer of `bytes`.
double time_collective(MPI_Comm comm, Op op, double bytes, int repeats) {
  int p = 0;
  check(MPI_Comm_size(comm, &p), "MPI_Comm_size");
  const int count = std::max(1, static_cast<int>(bytes / 4 / p));  // floats per member chunk
  std::vector<float> full(static_cast<size_t>(count) * p, 1.0f), chunk(static_cast<size_t>(count), 1.0f);
  std::vector<int> counts(static_cast<size_t>(p), count);  // MPI_Reduce_scatter has a ring algorithm
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    check(MPI_Barrier(comm), "MPI_Barrier");
    const double t0 = now();
    if (op == Op::AllGather)
      check(MPI_Allgather(chunk.data(), count, MPI_FLOAT, full.data(), count, MPI_FLOAT, comm), "MPI_Allgather");
    else if (op == Op::ReduceScatter)
      check(MPI_Reduce_scatter(full.data(), chunk.data(), counts.data(), MPI_FLOAT, MPI_SUM, comm),
            "MPI_Reduce_scatter");
    else
      check(MPI_Allreduce(MPI_IN_PLACE, full.data(), count * p, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
    double t = now() - t0, slowest = 0;
    check(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
    if (r > 0) times.push_back(slowest);  // the first is a warm-up
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One-way time of `bytes` between ranks `a` and `b` of `comm` (half a ping-pong, median).
double time_point_to_point(MPI_Comm comm, int a, int b, double bytes, int repeats) {
  int rank = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  std::vector<char> buf(static_cast<size_t>(bytes));
  const int n = static_cast<int>(bytes);
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    check(MPI_Barrier(comm), "MPI_Barrier");
    const double t0 = now();
    if (rank == a) {
      check(MPI_Send(buf.data(), n, MPI_CHAR, b, 7, comm), "MPI_Send");
      check(MPI_Recv(buf.data(), n, MPI_CHAR, b, 7, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    } else if (rank == b) {
      check(MPI_Recv(buf.data(), n, MPI_CHAR, a, 7, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      check(MPI_Send(buf.data(), n, MPI_CHAR, a, 7, comm), "MPI_Send");
    }
    double t = (now() - t0) / 2, slowest = 0;
    check(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
    if (r > 0) times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string fit_row(const std::string& what, const planner::BandwidthFit& f, double scale, const char* unit,
                    double overhead_scale, const char* overhead_unit) {
  return fmt::format("{:<28} {:>10.3f} {}  overhead {:>8.1f} {}  R^2 {:.3f}  max rel. err {:.1f}%\n", what,
                     f.beta_bytes_per_s / scale, unit, f.alpha_s * overhead_scale, overhead_unit, f.r2,
                     100 * f.max_relative_error);
}

}  // namespace

std::vector<planner::MatmulShape> model_matmul_shapes(const std::string& model_name, int64_t gpus, int64_t batch_seqs) {
  const model::ModelDescription m = model::load_model(model_name);
  if (batch_seqs < 1) throw Error("calibrate", "no batch size for the model's shapes", "--batch-seqs", "an integer >= 1");
  std::vector<planner::MatmulShape> shapes;
  auto add = [&](const std::vector<planner::MatmulShape>& v) {
    for (const auto& s : v)
      if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
  };
  for (const auto& g : planner::enumerate_grids(gpus)) {
    if (g.ginter != 1 || batch_seqs % g.gdata != 0) continue;
    const int64_t mb = batch_seqs / g.gdata;
    if (plan::divisibility_problem(m, g, batch_seqs, mb)) continue;
    for (const auto& l : m.layers) {
      add(planner::forward_matmuls(l, g, mb, m.seq_len));
      add(planner::backward_input_matmuls(l, g, mb, m.seq_len));
      add(planner::backward_weight_matmuls(l, g, mb, m.seq_len));
    }
  }
  return shapes;
}

int run_calibrate(const CalibrateOptions& o, const KernelTimers& timers, std::ostream& out, std::ostream& err) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    prefer_ring_collectives();
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
  }
  int rank = 0, world = 1;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
  auto finish = [&](int code) {
    MPI_Finalize();
    return code;
  };
  try {
    if (world < 2) throw Error("calibrate", "only 1 rank", "MPI world", "at least 2 ranks: run under mpirun -np N");
    if (o.gpus_per_node < 1 || world % o.gpus_per_node != 0)
      throw Error("calibrate", fmt::format("{} ranks do not fill nodes of {} GPUs", world, o.gpus_per_node),
                  "--gpus-per-node", "a divisor of the number of ranks");
    topo::Topology t = topo::load_topology(o.base);
    const int gpn = o.gpus_per_node;
    std::vector<planner::MatmulShape> shapes;
    model::ModelDescription model;
    if (!o.model.empty()) {
      if (!timers)
        throw Error("calibrate", "this axplan was built without LibTorch", "--model",
                    "an axplan built with AXONN_WITH_TORCH to time matmuls");
      shapes = model_matmul_shapes(o.model, world, o.batch_seqs);
      model = model::load_model(o.model);
    }
    // (ip, p) -> samples; inside one node or across nodes
    struct Group {
      bool inside_node;
      std::vector<planner::CollectiveSample> samples;
    };
    std::map<std::pair<int, int>, Group> groups;
    for (int p = 2; p <= world; ++p) {
      if (world % p != 0) continue;
      for (int ip = 1; ip * p <= world; ++ip) {
        if (world % (ip * p) != 0) continue;
        // members: base + ip*j, base = block start + offset within the stride
        const int block = rank / (ip * p), offset = rank % ip;
        MPI_Comm comm = MPI_COMM_NULL;
        check(MPI_Comm_split(MPI_COMM_WORLD, block * ip + offset, rank, &comm), "MPI_Comm_split");
        Group& g = groups[{ip, p}];
        g.inside_node = ip * p <= gpn && gpn % (ip * p) == 0;
        for (double bytes : o.sizes_bytes) {
          g.samples.push_back(planner::all_gather_sample(p, bytes, time_collective(comm, Op::AllGather, bytes, o.repeats)));
          g.samples.push_back(
              planner::all_gather_sample(p, bytes, time_collective(comm, Op::ReduceScatter, bytes, o.repeats)));
          g.samples.push_back(planner::all_reduce_sample(p, bytes, time_collective(comm, Op::AllReduce, bytes, o.repeats)));
        }
        check(MPI_Comm_free(&comm), "MPI_Comm_free");
      }
    }
    // Point-to-point: a pair inside node 0 (if it has 2 ranks), a pair across nodes 0 and 1.
    std::vector<planner::CollectiveSample> p2p_intra, p2p_inter;
    for (double bytes : o.sizes_bytes) {
      if (gpn >= 2) p2p_intra.push_back({1, bytes, time_point_to_point(MPI_COMM_WORLD, 0, 1, bytes, o.repeats)});
      if (world > gpn) p2p_inter.push_back({1, bytes, time_point_to_point(MPI_COMM_WORLD, 0, gpn, bytes, o.repeats)});
    }
    // Matmuls: every rank at once (ranks of a node share its cores, as in training);
    // the median over ranks of each rank's median (a rank descheduled for a long
    // stretch is an outlier, not the rate the ranks get).
    std::vector<double> matmul_seconds, all(static_cast<size_t>(world));
    for (const auto& s : shapes) {
      check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      double mine = timers.matmul(s, o.matmul_repeats);
      check(MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
      std::sort(all.begin(), all.end());
      matmul_seconds.push_back(0.5 * (all[(all.size() - 1) / 2] + all[all.size() / 2]));
    }
    // Element-wise operations, about 2^20 elements each, at the model's widths.
    std::map<std::string, topo::ElementwiseCost> elementwise;
    if (!o.model.empty()) {
      const int64_t h = model.hidden, ffn = model.ffn_hidden > 0 ? model.ffn_hidden : h;
      const int64_t vocab = model.vocab > 0 ? model.vocab : h;
      const std::map<std::string, int64_t> width = {{"bias", ffn},        {"layer_norm", h},
                                                    {"gelu", ffn},        {"residual", h},
                                                    {"softmax", model.seq_len}, {"cross_entropy", vocab},
                                                    {"adam", 1024}};
      for (const auto& op : topo::elementwise_op_names()) {
        const int64_t w = width.at(op), rows = std::max<int64_t>(1, (int64_t{1} << 20) / w);
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        const topo::ElementwiseCost mine = timers.elementwise(op, op == "softmax" ? rows / w * w : rows, w,
                                                              o.matmul_repeats);
        double f[2] = {mine.forward_s_per_element, mine.backward_s_per_element};
        std::vector<double> fa(static_cast<size_t>(world)), ba(static_cast<size_t>(world));
        check(MPI_Gather(&f[0], 1, MPI_DOUBLE, fa.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
        check(MPI_Gather(&f[1], 1, MPI_DOUBLE, ba.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
        auto median = [](std::vector<double>& v) {
          std::sort(v.begin(), v.end());
          return 0.5 * (v[(v.size() - 1) / 2] + v[v.size() / 2]);
        };
        elementwise[op] = {median(fa), median(ba)};
      }
    }
    if (rank == 0) {
      topo::Topology c = t;
      c.name = o.name;
      c.description = fmt::format(
          "measured by axplan calibrate on {} ranks ({} per node){}; memory and peak FLOP/s from '{}'", world, gpn,
          o.model.empty() ? "" : fmt::format(", matmuls of {} at {} sequences per step", o.model, o.batch_seqs),
          o.base);
      c.gpus_per_node = gpn;
      c.num_nodes = world / gpn;
      c.intra_node_table.clear();
      std::vector<double> alphas;
      fmt::print(out, "{:>4} {:>4}  {:>12}  {:>14}  {:>10}  {:>6}  {}\n", "ip", "p", "where", "beta (GB/s)",
                 "alpha (us)", "R^2", "max rel. err");
      double inter = 0, intra_fallback = 0;
      for (const auto& [key, g] : groups) {
        auto f = planner::fit_latency_bandwidth(g.samples);
        alphas.push_back(f.alpha_s);
        fmt::print(out, "{:>4} {:>4}  {:>12}  {:>14.3f}  {:>10.1f}  {:>6.3f}  {:.1f}%\n", key.first, key.second,
                   g.inside_node ? "intra-node" : "across nodes", f.beta_bytes_per_s / 1e9, f.alpha_s * 1e6, f.r2,
                   100 * f.max_relative_error);
        if (g.inside_node) {
          c.intra_node_table.push_back({key.first, key.second, f.beta_bytes_per_s});
          if (key.first == 1 && key.second == 2) intra_fallback = f.beta_bytes_per_s;
        } else if (key.first == 1 && key.second == world) {
          inter = f.beta_bytes_per_s;
        }
      }
      if (inter == 0) throw Error("calibrate", "no ring spans the nodes", "--gpus-per-node", "more than one node");
      out << "\n";
      if (!p2p_intra.empty() && !p2p_inter.empty()) {
        const auto fi = planner::fit_latency_bandwidth(p2p_intra), fx = planner::fit_latency_bandwidth(p2p_inter);
        out << fit_row("point-to-point intra-node", fi, 1e9, "GB/s", 1e6, "us");
        out << fit_row("point-to-point across nodes", fx, 1e9, "GB/s", 1e6, "us");
        c.point_to_point = {fi.beta_bytes_per_s, fx.beta_bytes_per_s};
      }
      c.compute = {};
      c.compute.elementwise = elementwise;
      for (const auto& [op, cost] : elementwise)
        fmt::print(out, "element-wise {:<14} forward {:>7.2f} ns/element  backward {:>7.2f} ns/element\n", op,
                   cost.forward_s_per_element * 1e9, cost.backward_s_per_element * 1e9);
      if (!shapes.empty()) {
        std::vector<planner::CollectiveSample> samples;
        for (size_t i = 0; i < shapes.size(); ++i) {
          samples.push_back({1, shapes[i].flops(), matmul_seconds[i]});
          c.compute.matmul_table.push_back(
              {shapes[i].m, shapes[i].k, shapes[i].n, shapes[i].batch, matmul_seconds[i]});
        }
        try {
          const auto f = planner::fit_latency_bandwidth(samples);
          out << fit_row(fmt::format("matmul ({} shapes of {})", shapes.size(), o.model), f, 1e9, "GFLOP/s", 1e6, "us");
          c.compute.matmul_flops_per_s = f.beta_bytes_per_s;
          c.compute.matmul_overhead_s = f.alpha_s;
        } catch (const Error& e) {
          // Times that do not grow with FLOPs (noise): the table still holds every shape;
          // shapes outside it get the aggregate rate.
          double flops = 0, seconds = 0;
          for (const auto& s : samples) flops += s.bytes_moved, seconds += s.seconds;
          c.compute.matmul_flops_per_s = flops / seconds;
          fmt::print(out, "matmul ({} shapes of {}): no fit ({}); aggregate {:.3f} GFLOP/s\n", shapes.size(), o.model,
                     e.what(), c.compute.matmul_flops_per_s / 1e9);
        }
      }
      c.inter_node_bandwidth_bytes_per_s = inter;
      if (intra_fallback > 0) c.intra_node_bandwidth_bytes_per_s = intra_fallback;
      std::sort(alphas.begin(), alphas.end());
      c.collective_latency_s = alphas[alphas.size() / 2];
      const std::string tmp = o.output + ".tmp";
      {
        std::ofstream f(tmp);
        f << topo::topology_to_json(c).dump(2) << "\n";
        if (!f.flush()) throw Error("calibrate", "cannot write", tmp, "a writable path");
      }
      if (std::rename(tmp.c_str(), o.output.c_str()) != 0)
        throw Error("calibrate", "cannot rename", tmp, "a writable directory");
      fmt::print(out, "inter-node bandwidth {:.3f} GB/s (ring over all {} ranks), latency {:.1f} us; wrote {}\n",
                 inter / 1e9, world, c.collective_latency_s * 1e6, o.output);
    }
  } catch (const Error& e) {  // input errors: every rank finds them alike
    if (rank == 0) err << "axplan: " << e.what() << "\n";
    return finish(kExitUsage);
  } catch (const std::exception& e) {  // a failure of this rank alone: end every rank
    err << "axplan: calibrate failed on rank " << rank << ": " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return finish(0);
}

}  // namespace axonn::tools
