// bench_collective_algorithms: Open MPI's non-blocking collectives and the runtime's
// own rings against the blocking ring ones that `axplan calibrate` fits the link rate
// on (docs/validation.md, "The non-blocking all-gather"). Open MPI runs MPI_Iallgather
// and MPI_Ireduce_scatter in coll/libnbc, which has no ring for either; across nodes
// they move more bytes over a node's link. The runtime's MPI backend therefore runs
// its all-gathers and reduce-scatters as rings of its own (runtime/mpi_ring.hpp), and
// its all-reduce as libnbc's ring. For every group shape (ip, p) with ip * p = the
// world (all groups at once, as eq. 10 assumes), it prints the median time of each
// (slowest member) and the ratios to the blocking ring.
//
//   tools/emulated_cluster.sh --nodes 2 --gpus-per-node 4 --rate 200mbit --
//       build/tools/bench_collective_algorithms --gpus-per-node 4 --mib 4   (one line)
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/core.h>
#include <vector>

#include "axonn/common/median.hpp"
#include "axonn/common/ring_collectives.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/runtime/mpi_ring.hpp"

namespace {

enum class Op { RingAllGather, NonblockingAllGather, RuntimeAllGather, RingReduceScatter, NonblockingReduceScatter,
                RuntimeReduceScatter, RingAllReduce, NonblockingAllReduce };

// The runtime's ring on `g`, run to completion.
void run_ring(axonn::runtime::MpiRing::Kind kind, const void* in, void* out, int count, int p, MPI_Comm g) {
  axonn::runtime::MpiRing ring(kind, in, out, std::vector<int>(static_cast<size_t>(p), count), MPI_FLOAT, MPI_SUM, g,
                               0);
  while (!ring.advance()) {
  }
}

// One call of `op` on `g`, seconds (the slowest member's).
double run_once(Op op, MPI_Comm g, std::vector<float>& full, std::vector<float>& chunk, int count, int p) {
  std::vector<int> counts(static_cast<size_t>(p), count);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  MPI_Request q = MPI_REQUEST_NULL;
  switch (op) {
    case Op::RingAllGather:
      MPI_Allgather(chunk.data(), count, MPI_FLOAT, full.data(), count, MPI_FLOAT, g);
      break;
    case Op::NonblockingAllGather:
      MPI_Iallgather(chunk.data(), count, MPI_FLOAT, full.data(), count, MPI_FLOAT, g, &q);
      break;
    case Op::RuntimeAllGather:
      run_ring(axonn::runtime::MpiRing::Kind::AllGather, chunk.data(), full.data(), count, p, g);
      break;
    case Op::RuntimeReduceScatter:
      run_ring(axonn::runtime::MpiRing::Kind::ReduceScatter, full.data(), chunk.data(), count, p, g);
      break;
    case Op::RingReduceScatter:
      MPI_Reduce_scatter(full.data(), chunk.data(), counts.data(), MPI_FLOAT, MPI_SUM, g);
      break;
    case Op::NonblockingReduceScatter:
      MPI_Ireduce_scatter_block(full.data(), chunk.data(), count, MPI_FLOAT, MPI_SUM, g, &q);
      break;
    case Op::RingAllReduce:
      MPI_Allreduce(MPI_IN_PLACE, full.data(), count * p, MPI_FLOAT, MPI_SUM, g);
      break;
    case Op::NonblockingAllReduce:
      MPI_Iallreduce(MPI_IN_PLACE, full.data(), count * p, MPI_FLOAT, MPI_SUM, g, &q);
      break;
  }
  MPI_Wait(&q, MPI_STATUS_IGNORE);
  double mine = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Open MPI's non-blocking collectives and the runtime's rings against the blocking rings"};
  int64_t gpn = 0;
  double mib = 4;
  int repeats = 5;
  app.add_option("--gpus-per-node", gpn, "ranks per node (the launcher's)")->required()->check(CLI::PositiveNumber);
  app.add_option("--mib", mib, "buffer size, MiB (all-gather output, reduce-scatter input)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed calls per collective (median)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  axonn::prefer_ring_collectives();  // as the runtime and calibrate do: rings where Open MPI has them
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world % gpn != 0) {
    if (rank == 0) fmt::print(stderr, "bench_collective_algorithms: {} ranks do not fill nodes of {}\n", world, gpn);
    MPI_Finalize();
    return 2;
  }
  if (rank == 0)
    fmt::print("{} ranks, {} per node, {} MiB, median of {}\n| ip | p | members per node | collective | blocking ring (s) | "
               "libnbc (s) | ratio | its linear all-gather's model | runtime (s) | ratio |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n",
               world, gpn, mib, repeats);
  for (int p = 2; p <= world; ++p) {
    if (world % p != 0) continue;
    const int ip = world / p;
    const int coord = (rank / ip) % p;
    MPI_Comm g;
    MPI_Comm_split(MPI_COMM_WORLD, rank - coord * ip, rank, &g);
    const int count = std::max(1, static_cast<int>(mib * 1048576 / 4 / p));
    std::vector<float> full(static_cast<size_t>(count) * p, 1.0f), chunk(static_cast<size_t>(count), 1.0f);
    // The planner's members per node for these groups: Y of the grid ip x p (X inside it).
    axonn::topo::Topology nodes;
    nodes.gpus_per_node = gpn;
    const int64_t m = axonn::planner::members_per_node(nodes, axonn::topo::Grid{ip, p, 1, 1, 1},
                                                       axonn::topo::default_order(),
                                                       axonn::planner::BandwidthRule::Straddle)[static_cast<int>(axonn::topo::Axis::Y)];
    const struct {
      const char* name;
      Op ring, nonblocking, runtime;  // the runtime's all-reduce is libnbc's ring
      double slowdown;
    } rows[] = {
        {"all-gather", Op::RingAllGather, Op::NonblockingAllGather, Op::RuntimeAllGather,
         axonn::planner::all_gather_slowdown(axonn::topo::AllGatherAlgorithm::Linear, p, m)},
        {"reduce-scatter", Op::RingReduceScatter, Op::NonblockingReduceScatter, Op::RuntimeReduceScatter, 1.0},
        {"all-reduce", Op::RingAllReduce, Op::NonblockingAllReduce, Op::NonblockingAllReduce, 1.0},
    };
    for (const auto& row : rows) {
      std::vector<double> ring, nonblocking, runtime;
      for (Op op : {row.ring, row.nonblocking, row.runtime}) run_once(op, g, full, chunk, count, p);  // warm-up
      for (int r = 0; r < repeats; ++r) {  // taking turns, so that drift reaches all three alike
        ring.push_back(run_once(row.ring, g, full, chunk, count, p));
        nonblocking.push_back(run_once(row.nonblocking, g, full, chunk, count, p));
        runtime.push_back(run_once(row.runtime, g, full, chunk, count, p));
      }
      const double a = axonn::median(ring), b = axonn::median(nonblocking), c = axonn::median(runtime);
      if (rank == 0)
        fmt::print("| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.2f} | {:.2f} | {:.3f} | {:.2f} |\n", ip, p, m, row.name,
                   a, b, b / a, row.slowdown, c, c / a);
    }
    MPI_Comm_free(&g);
  }
  MPI_Finalize();
  return 0;
}
