// Measuring a cluster; see axonn/runtime/calibration.hpp.
#include "axonn/runtime/calibration.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/mean.hpp"
#include "axonn/common/median.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/kernel_timing.hpp"
#include "axonn/runtime/machine_cores.hpp"

namespace axonn::runtime {
namespace {

// The slowest member's value of `seconds` (a max all-reduce over `c`).
double slowest(Communicator& c, double seconds) {
  at::Tensor t = at::full({1}, seconds, at::kDouble);
  all_reduce_now(c, t, ReduceOp::Max);
  return t.item<double>();
}

// Each rank of `c`'s `value`, in rank order.
std::vector<double> values_over_ranks(Communicator& c, double value) {
  at::Tensor all = at::empty({c.size()}, at::kDouble);
  c.all_gather(at::full({1}, value, at::kDouble), all)->wait();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + c.size());
}

// The median over the ranks of `c` of each rank's `value`.
double median_over_ranks(Communicator& c, double value) { return median(values_over_ranks(c, value)); }

double time_collective(MpiCommunicator& c, topo::CollectiveOp op, double bytes, int repeats) {
  // The collectives the runtime issues, through its own communicator: its rings for the
  // all-gather and the reduce-scatter (mpi_ring.hpp), libnbc's ring for the all-reduce.
  const int p = c.size();
  const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4 / p));  // floats per member chunk
  at::Tensor full = at::ones({count * p}, at::kFloat), chunk = at::ones({count}, at::kFloat);
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    c.barrier();
    const double t0 = now_s();
    switch (op) {
      case topo::CollectiveOp::AllGather:
        c.all_gather(chunk, full)->wait();
        break;
      case topo::CollectiveOp::ReduceScatter:
        c.reduce_scatter(full, chunk)->wait();
        break;
      case topo::CollectiveOp::AllReduce:
        c.all_reduce(full, ReduceOp::Sum)->wait();
        break;
    }
    const double t = slowest(c, now_s() - t0);
    if (r > 0) times.push_back(t);  // the first is a warm-up
  }
  return median(times);
}

// One-way time of `bytes` between ranks a and b of `world` (half a ping-pong, median);
// every rank takes part in the barriers and returns the same value.
double time_point_to_point(Communicator& world, int a, int b, double bytes, int repeats) {
  at::Tensor buf = at::zeros({std::max<int64_t>(1, static_cast<int64_t>(bytes / 4))}, at::kFloat);
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    world.barrier();
    const double t0 = now_s();
    if (world.rank() == a) {
      world.send(buf, b, 7)->wait();
      world.recv(buf, b, 7)->wait();
    } else if (world.rank() == b) {
      world.recv(buf, a, 7)->wait();
      world.send(buf, a, 7)->wait();
    }
    const double t = slowest(world, (now_s() - t0) / 2);
    if (r > 0) times.push_back(t);
  }
  return median(times);
}

// One round of sync-wait samples of `group`, p consecutive ranks of `world` (docs/model.md
// section 8): every rank of the world runs the same burst of 128^3 matmuls at once,
// then a one-element all-reduce over its group. With loop = 0, per burst size, each
// rank's medians over `repeats` runs (each after a barrier, a warm-up first), then the
// medians over the ranks; with loop = N, the burst and its all-reduce N times in a row
// after one barrier and a warm-up, each rank's means, then the means over the ranks.
void time_sync_waits(MpiCommunicator& world, MpiCommunicator& group, const std::vector<int>& bursts, int repeats,
                     int loop, int64_t round, std::vector<topo::SyncWaitTiming>& out) {
  const at::Tensor a = at::randn({128, 128}), b = at::randn({128, 128});
  at::Tensor c;
  float one = 1.0f;
  for (int burst : bursts) {
    std::vector<double> compute, wait;
    const int runs = loop > 0 ? loop : repeats;
    if (loop > 0) world.barrier();
    for (int r = 0; r < runs + 1; ++r) {
      if (loop == 0) world.barrier();
      const double t0 = now_s();
      for (int i = 0; i < burst; ++i) c = at::matmul(a, b);
      const double t1 = now_s();
      AXONN_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, group.handle()));
      if (r > 0) compute.push_back(t1 - t0), wait.push_back(now_s() - t1);
    }
    if (loop > 0)
      out.push_back({group.size(), mean(values_over_ranks(world, mean(compute))),
                     mean(values_over_ranks(world, mean(wait))), round});
    else
      out.push_back(
          {group.size(), median_over_ranks(world, median(compute)), median_over_ranks(world, median(wait)), round});
  }
}

// The waiting-share rounds (ClusterMeasurements::waiting_shares; docs/model.md section
// 10, "Waiting stages lend their cores"), after a warm-up round: every rank's burst, then
// the computing half's, with the other half polling for its message as a pipeline stage
// polls (test, then yield the CPU), inside a node and across nodes where the world has
// an even count of each.
void time_waiting_shares(MpiCommunicator& world, int64_t gpn, int burst, int rounds,
                         std::vector<topo::WaitingShareTiming>& out) {
  const int64_t n = world.size(), rank = world.rank(), node = rank / gpn, local = rank % gpn;
  const bool inside = gpn % 2 == 0, across = (n / gpn) % 2 == 0;
  const at::Tensor a = at::randn({128, 128}), b = at::randn({128, 128});
  at::Tensor c, token = at::zeros({1});
  auto run_burst = [&] {
    const double t0 = now_s();
    for (int i = 0; i < burst; ++i) c = at::matmul(a, b);
    return now_s() - t0;
  };
  for (int round = 0; round <= rounds; ++round) {
    world.barrier();
    const double all = median_over_ranks(world, run_burst());
    for (const bool crossing : {false, true}) {
      if (!(crossing ? across : inside)) continue;
      const bool computing = crossing ? node % 2 == 0 : local % 2 == 0;
      const int64_t step = crossing ? gpn : 1;
      world.barrier();
      double mine = 0;  // waiting ranks: none (left out of the median)
      if (computing) {
        mine = run_burst();
        world.send(token, static_cast<int>(rank + step), 11)->wait();
      } else {
        WorkHandle w = world.recv(token, static_cast<int>(rank - step), 11);
        IdleWait idle;
        while (!w->test()) idle.pause();
      }
      std::vector<double> half;
      for (double t : values_over_ranks(world, mine))
        if (t > 0) half.push_back(t);
      if (round > 0) out.push_back({crossing, median(half) / all, round - 1});
    }
  }
}

// The latency rounds (ClusterMeasurements::latencies; docs/model.md section 1): pairs
// of ranks `stride` apart (1: inside a node, gpus_per_node: across nodes), pair q of
// the n / 2 holding ranks (q / stride) 2 stride + q % stride and that + stride. Each
// round times, after 3 warm-ups, `calls` one-element all-reduces of the runtime's
// communicator: first every pair at once, then only the even pairs while each rank of an
// odd pair computes bursts of 4 matmuls (128^3) until the same member of the even pair
// beside it (q xor 1) says it is done. Needs an even number of pairs.
void time_latencies(MpiCommunicator& world, int64_t stride, bool across, int calls, int rounds,
                    std::vector<topo::LatencyTiming>& out) {
  const int64_t rank = world.rank();
  const int64_t q = rank / (2 * stride) * stride + rank % stride;  // this rank's pair
  const int64_t member = rank % (2 * stride) / stride;
  auto base = [stride](int64_t pair) { return pair / stride * 2 * stride + pair % stride; };
  auto split = world.split(static_cast<int>(q), static_cast<int>(rank), "latency");
  auto& pair = static_cast<MpiCommunicator&>(*split);  // the MPI backend splits into its own kind
  const int64_t partner = base(q ^ 1) + member * stride;  // the same member of the other pair of two
  const at::Tensor a = at::randn({128, 128}), b = at::randn({128, 128});
  at::Tensor c, zero = at::zeros({1}), token = at::zeros({1});  // zeros: the sums stay 0
  auto time_calls = [&] {
    std::vector<double> times;
    for (int i = 0; i < calls + 3; ++i) {
      const double t0 = now_s();
      pair.all_reduce(zero, ReduceOp::Sum)->wait();
      if (i >= 3) times.push_back(now_s() - t0);
    }
    return median(times);
  };
  for (int round = 0; round < rounds; ++round)
    for (const bool loaded : {false, true}) {
      world.barrier();
      double mine = 0;  // computing ranks: none (left out of the median)
      if (!loaded || q % 2 == 0) {
        mine = time_calls();
        if (loaded) world.send(token, static_cast<int>(partner), 13)->wait();
      } else {
        WorkHandle done = world.recv(token, static_cast<int>(partner), 13);
        while (!done->test())
          for (int i = 0; i < 4; ++i) c = at::matmul(a, b);
      }
      std::vector<double> timed;
      for (double t : values_over_ranks(world, mine))
        if (t > 0) timed.push_back(t);
      out.push_back({across, loaded, median(timed), round});
    }
}

// One round of every kernel of `r` in `dtype`, timed by every rank at once (a barrier
// before each kernel); each value is the median over ranks of each rank's median.
topo::KernelRound time_kernel_round(MpiCommunicator& world, const CalibrationRequest& r, int64_t round,
                                   at::ScalarType dtype) {
  topo::KernelRound k;
  k.round = round;
  for (const topo::MatmulTiming& s : r.matmuls) {
    world.barrier();
    k.matmul_s.push_back(median_over_ranks(world, time_matmul(s, r.kernel_repeats, dtype)));
  }
  for (const auto& [op, shape] : r.elementwise) {
    world.barrier();
    const topo::ElementwiseCost mine = time_elementwise(op, shape, r.kernel_repeats, dtype);
    k.elementwise[op] = {median_over_ranks(world, mine.forward_s_per_element),
                         median_over_ranks(world, mine.backward_s_per_element)};
  }
  return k;
}

}  // namespace

topo::ClusterMeasurements measure_cluster(MpiCommunicator& world, const CalibrationRequest& r) {
  topo::ClusterMeasurements m;
  const int64_t n = world.size(), gpn = r.gpus_per_node, rank = world.rank();
  m.world = n;
  m.gpus_per_node = gpn;
  m.nonblocking.all_gather = MpiCommunicator::kAllGatherAlgorithm;
  m.cores_per_rank = measure_cores_per_rank(world);
  // The sync-wait groups (ip = 1, every size): their rounds run half at the start and
  // half at the end, so that the spread over rounds covers the whole calibration.
  if (!r.sync_wait_bursts.empty() && r.sync_wait_rounds < 1)
    throw InputError("calibrate", fmt::format("{} sync-wait rounds", r.sync_wait_rounds), "sync_wait_rounds",
                     "at least 1 (or no bursts)");
  if (r.sync_wait_loop < 0)
    throw InputError("calibrate", fmt::format("a sync-wait loop of {}", r.sync_wait_loop), "sync_wait_loop",
                     "0 (barrier-separated runs) or more");
  if (r.waiting_share_rounds < 0)
    throw InputError("calibrate", fmt::format("{} waiting-share rounds", r.waiting_share_rounds),
                     "waiting_share_rounds", "0 or more");
  if (r.latency_rounds < 0 || r.latency_calls < 1)
    throw InputError("calibrate", fmt::format("{} latency rounds of {} calls", r.latency_rounds, r.latency_calls),
                     "latency_rounds, latency_calls", "0 or more rounds of at least 1 call");
  std::vector<std::unique_ptr<Communicator>> sync_groups;
  if (!r.sync_wait_bursts.empty() && !r.kernels_only)
    for (int64_t p = 2; p <= n; ++p)
      if (n % p == 0) sync_groups.push_back(world.split(static_cast<int>(rank / p), static_cast<int>(rank), "sync-wait"));
  auto sync_wait_rounds = [&](int first, int last) {
    for (int round = first; round < last; ++round)
      for (auto& g : sync_groups)  // the MPI backend splits into its own kind
        time_sync_waits(world, static_cast<MpiCommunicator&>(*g), r.sync_wait_bursts, r.repeats, r.sync_wait_loop,
                        round, m.sync_waits);
  };
  sync_wait_rounds(0, r.sync_wait_rounds / 2);
  // The collective groups, each (p, ip) with ip * p dividing the world.
  std::vector<std::pair<int64_t, int64_t>> groups;
  for (int64_t p = 2; p <= n && !r.kernels_only; ++p)
    if (n % p == 0)
      for (int64_t ip = 1; ip * p <= n; ++ip)
        if (n % (ip * p) == 0) groups.push_back({p, ip});
  // The kernel rounds, spread over the collectives: round i runs before group
  // i * G / (N - 1) of the G groups (G: after the last), so the first runs before them
  // and the last after them.
  const bool kernels = !r.matmuls.empty() || !r.elementwise.empty();
  if (kernels && r.kernel_rounds < 1)
    throw InputError("calibrate", fmt::format("{} kernel rounds", r.kernel_rounds), "kernel_rounds", "at least 1");
  const int64_t slots = static_cast<int64_t>(groups.size());
  auto kernel_rounds_at = [&](int64_t slot) {
    for (int i = 0; kernels && i < r.kernel_rounds; ++i)
      if ((r.kernel_rounds == 1 ? 0 : i * slots / (r.kernel_rounds - 1)) == slot) {
        m.kernel_rounds.push_back(time_kernel_round(world, r, i, at::kFloat));
        if (r.bf16_kernels) m.bf16_kernel_rounds.push_back(time_kernel_round(world, r, i, at::kBFloat16));
      }
  };
  for (int64_t g = 0; g < slots; ++g) {
    kernel_rounds_at(g);
    const auto [p, ip] = groups[static_cast<size_t>(g)];
    // members: base + ip*j, base = block start + offset within the stride
    const int64_t block = rank / (ip * p), offset = rank % ip;
    auto split = world.split(static_cast<int>(block * ip + offset), static_cast<int>(rank), "calibrate");
    auto& group = static_cast<MpiCommunicator&>(*split);  // the MPI backend splits into its own kind
    const bool inside = ip * p <= gpn && gpn % (ip * p) == 0;
    for (double bytes : r.sizes_bytes)
      for (auto op : {topo::CollectiveOp::AllGather, topo::CollectiveOp::ReduceScatter, topo::CollectiveOp::AllReduce})
        m.collectives.push_back({op, ip, p, inside, bytes, time_collective(group, op, bytes, r.repeats)});
  }
  kernel_rounds_at(slots);
  for (double bytes : r.kernels_only ? std::vector<double>{} : r.sizes_bytes) {
    if (gpn >= 2) m.point_to_point.push_back({true, bytes, time_point_to_point(world, 0, 1, bytes, r.repeats)});
    if (n > gpn)
      m.point_to_point.push_back({false, bytes, time_point_to_point(world, 0, static_cast<int>(gpn), bytes, r.repeats)});
  }
  m.matmuls = r.matmuls;  // the shapes; their times are the rounds'
  sync_wait_rounds(r.sync_wait_rounds / 2, r.sync_wait_rounds);
  if (!r.kernels_only && r.waiting_share_rounds > 0)
    time_waiting_shares(world, gpn, r.waiting_share_burst, r.waiting_share_rounds, m.waiting_shares);
  if (!r.kernels_only && r.latency_rounds > 0 && n % 4 == 0) {  // an even number of pairs
    if (gpn % 2 == 0) time_latencies(world, 1, false, r.latency_calls, r.latency_rounds, m.latencies);
    if (n > gpn && n % (2 * gpn) == 0)
      time_latencies(world, gpn, true, r.latency_calls, r.latency_rounds, m.latencies);
  }
  return m;
}

}  // namespace axonn::runtime
