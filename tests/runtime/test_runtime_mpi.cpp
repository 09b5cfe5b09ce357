// The runtime against serial LibTorch, under real mpirun (tests/CMakeLists.txt runs
// this binary with 1, 2, 4 and 8 ranks). Every grid (Gx, Gy, Gz, Gdata) whose product
// is the world size and that divides the model is checked; grids that do not divide
// are listed with the reason. Comparisons use EXPECT (not ASSERT) so that every rank
// reaches every collective even when a check fails.
#include <algorithm>
#include <sched.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <torch/torch.h>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/device_memory.hpp"
#include "axonn/runtime/host_malloc.hpp"
#include "axonn/runtime/launch.hpp"
#include "axonn/runtime/machine_cores.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/op_profile.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/split_layer_norm.hpp"
#include "axonn/runtime/stage_engine.hpp"
#include "axonn/runtime/tensor_parallel.hpp"
#include "axonn/runtime/trainer.hpp"
#include "axonn/schedule/schedule.hpp"
#include "mpi_test_main.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;
using topo::Axis;

namespace axonn::test {
runtime::MpiCommunicator* g_world = nullptr;
bool g_malloc_tuned = false;  // main() tuned the heap before any tensor
}

namespace {

// The grids with Ginter = 1 for the world size, and why the others were left out.
std::vector<topo::Grid> grids_for(const model::ModelDescription& m, int64_t seqs, std::vector<std::string>* skipped) {
  std::vector<topo::Grid> out;
  for (const auto& g : planner::enumerate_grids(g_world->size())) {
    if (g.ginter != 1) continue;
    std::optional<std::string> why;
    if (seqs % g.gdata != 0) why = "batch not divisible by gdata";
    else why = plan::divisibility_problem(m, g, seqs, seqs / g.gdata);
    if (why) skipped->push_back(g.to_string() + ": " + *why);
    else out.push_back(g);
  }
  return out;
}

void report_skipped(const std::vector<std::string>& skipped) {
  if (g_world->rank() == 0)
    for (const auto& s : skipped) std::cout << "[ skipped  ] grid " << s << "\n";
}

}  // namespace

TEST(HostMalloc, TensorsComeFromTheHeapAndStayThere) {
  ASSERT_TRUE(g_malloc_tuned);
  // A 16 MiB tensor: under glibc's defaults its own mmap (threshold 128 KiB at start),
  // unmapped when freed. Tuned: carved from the heap, which keeps it after the free.
  const auto before = mallinfo2();
  {
    at::Tensor t = at::ones({4 << 20}, at::kFloat);
    EXPECT_EQ(mallinfo2().hblkhd, before.hblkhd) << "the tensor was mmapped";
    EXPECT_GE(mallinfo2().arena, before.arena + (16u << 20) - before.fordblks);
  }
  const auto after = mallinfo2();
  EXPECT_GE(after.arena, before.arena + (16u << 20) - before.fordblks) << "the heap was trimmed";
  EXPECT_GE(after.fordblks, 16u << 20);  // the freed block waits for the next step
  // The user's settings win, and so does the switch back to glibc's behaviour.
  setenv("AXONN_HOST_MALLOC", "default", 1);
  EXPECT_FALSE(runtime::tune_host_malloc());
  unsetenv("AXONN_HOST_MALLOC");
  setenv("MALLOC_TRIM_THRESHOLD_", "1000", 1);
  EXPECT_FALSE(runtime::tune_host_malloc());
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  EXPECT_TRUE(runtime::tune_host_malloc());
}

TEST(DeviceMemory, CountsEveryTensorAndRefusesPastTheBudget) {
  using runtime::DeviceMemory;
  DeviceMemory::install();
  ASSERT_TRUE(DeviceMemory::installed());
  constexpr int64_t MiB = 1 << 20;
  const int64_t base = DeviceMemory::live_bytes();
  DeviceMemory::reset_peak();
  EXPECT_EQ(DeviceMemory::peak_bytes(), base);
  {
    at::Tensor a = at::empty({MiB}, at::kFloat);  // 4 MiB
    EXPECT_EQ(DeviceMemory::live_bytes() - base, 4 * MiB);
    {
      at::Tensor b = a.view({2, -1}).sum(0);  // a result of 2 MiB
      EXPECT_EQ(DeviceMemory::live_bytes() - base, 6 * MiB);
    }
    EXPECT_EQ(DeviceMemory::live_bytes() - base, 4 * MiB);  // b returned
  }
  EXPECT_EQ(DeviceMemory::live_bytes(), base);  // every block returned, counted at its own size
  EXPECT_EQ(DeviceMemory::peak_bytes() - base, 6 * MiB);

  // Past the budget: refused like a GPU out of memory, nothing allocated, the message
  // names the flag; below it, allocations go on.
  DeviceMemory::set_budget(base + 2 * MiB);
  EXPECT_EQ(DeviceMemory::budget_bytes(), base + 2 * MiB);
  try {
    at::Tensor too_big = at::ones({MiB}, at::kFloat);
    ADD_FAILURE() << "4 MiB allocated under a 2 MiB budget";
  } catch (const runtime::OutOfDeviceMemory& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
    EXPECT_EQ(exit_code(e), kExitUsage);
  }
  EXPECT_EQ(DeviceMemory::live_bytes(), base);
  EXPECT_EQ(at::ones({MiB / 4}, at::kFloat).sum().item<float>(), static_cast<float>(MiB / 4));
  DeviceMemory::set_budget(0);
  EXPECT_EQ(at::ones({MiB}, at::kFloat).sum().item<float>(), static_cast<float>(MiB));
}

// Freed blocks are kept by size class (512-byte steps) and handed out again, as the CUDA
// caching allocator does; live and peak still count the bytes requested.
TEST(DeviceMemory, CachesFreedBlocksBySizeClassUntilEmptied) {
  using runtime::DeviceMemory;
  DeviceMemory::install();
  DeviceMemory::empty_cache();
  const int64_t live0 = DeviceMemory::live_bytes(), reserved0 = DeviceMemory::reserved_bytes();
  constexpr int64_t kBlock = 64 + 4096;  // header + 4000 bytes rounded up to 512
  const void* first = nullptr;
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    first = a.data_ptr();
    EXPECT_EQ(DeviceMemory::live_bytes() - live0, 4000);
    EXPECT_EQ(DeviceMemory::reserved_bytes() - reserved0, kBlock);
  }
  EXPECT_EQ(DeviceMemory::live_bytes(), live0);
  EXPECT_EQ(DeviceMemory::reserved_bytes() - reserved0, kBlock);  // cached, not returned to the heap
  {
    at::Tensor b = at::empty({1024}, at::kFloat);  // 4096 bytes: the same class
    EXPECT_EQ(b.data_ptr(), first);
    EXPECT_EQ(DeviceMemory::live_bytes() - live0, 4096);
    EXPECT_EQ(DeviceMemory::reserved_bytes() - reserved0, kBlock);
    at::Tensor c = at::empty({1200}, at::kFloat);  // 4800 bytes: the next class, a new block
    EXPECT_EQ(DeviceMemory::reserved_bytes() - reserved0, kBlock + 64 + 5120);
  }
  DeviceMemory::empty_cache();
  EXPECT_EQ(DeviceMemory::reserved_bytes(), reserved0);
  EXPECT_EQ(DeviceMemory::live_bytes(), live0);
}

TEST(DeviceMemory, ABudgetBelowTheStepsPeakFailsItsBackwardAndTheMeasuredPeakIsEnough) {
  // A serial GPT step (no communication, so one rank may fail alone): the budget is the
  // live bytes the forward reached. The backward needs more and fails through autograd
  // with the typed error; with the budget at the measured peak the same step runs.
  using runtime::DeviceMemory;
  DeviceMemory::install();
  const gpt::GptConfig cfg = gpt::GptConfig::from(model::load_model("gpt-tiny"));
  gpt::SerialGpt serial(cfg, 3);
  const at::Tensor batch = runtime::make_token_source("", cfg.vocab, 4, cfg.seq_len, 5)->batch(0);
  auto step = [&] {
    for (auto& [name, t] : serial.named_parameters()) t.mutable_grad() = at::Tensor();
    DeviceMemory::reset_peak();
    at::Tensor loss = serial.loss(batch);
    const int64_t forward_peak = DeviceMemory::peak_bytes();
    loss.backward();
    return std::make_pair(forward_peak, DeviceMemory::peak_bytes());
  };
  const auto [forward_peak, step_peak] = step();
  ASSERT_GT(step_peak, forward_peak) << "the backward must need more than the forward for this test";
  DeviceMemory::set_budget(forward_peak);
  EXPECT_THROW(step(), runtime::OutOfDeviceMemory);
  // Requested bytes are counted, so the same step allocates the same again after the
  // failed one (which must have returned everything it held).
  DeviceMemory::set_budget(step_peak);
  EXPECT_NO_THROW(step());
  EXPECT_EQ(DeviceMemory::peak_bytes(), step_peak);
  DeviceMemory::set_budget(0);
}

TEST(ComputeThreads, SetLibTorchsPoolAndTheBlasPool) {
  // at::set_num_threads alone leaves OpenBLAS's pool at every core of the machine, so
  // a rank's fp32 products ran on 2 threads whatever --threads said.
  ASSERT_GT(runtime::blas_threads(), 0) << "no OpenBLAS loaded; LibTorch must run on OpenBLAS (tools/setup.sh)";
  for (int n : {2, 1}) {
    runtime::set_compute_threads(n);
    EXPECT_EQ(at::get_num_threads(), n);
    EXPECT_EQ(runtime::blas_threads(), n);
  }
  EXPECT_THROW(runtime::set_compute_threads(0), InternalError);
  EXPECT_EQ(runtime::blas_threads(), 1);
}

TEST(OpProfile, SelfTimeLeavesOutTheOperatorsItCalled) {
  using R = runtime::OpRange;
  // linear [0, 10] calls mm [1, 7] (which calls empty [2, 3]) and add [8, 9]; a Pop
  // whose Push came before the profile is skipped, and a range left open inside a
  // closed one is dropped (its time stays its caller's).
  const std::vector<R> ranges = {{R::Kind::Pop, {}, 99, 0.0},          {R::Kind::Push, "linear", 1, 0.0},
                                 {R::Kind::Push, "mm", 2, 1.0},        {R::Kind::Push, "empty", 3, 2.0},
                                 {R::Kind::Pop, {}, 3, 3.0},           {R::Kind::Pop, {}, 2, 7.0},
                                 {R::Kind::Push, "add", 4, 8.0},       {R::Kind::Push, "lost", 5, 8.5},
                                 {R::Kind::Pop, {}, 4, 9.0},           {R::Kind::Pop, {}, 1, 10.0},
                                 {R::Kind::Push, "mm", 6, 11.0},       {R::Kind::Pop, {}, 6, 13.0}};
  std::map<std::string, runtime::OpTime> by;
  runtime::add_op_times(ranges, by);
  ASSERT_EQ(by.size(), 4u);  // "lost" never closed
  EXPECT_EQ(by["linear"].calls, 1);
  EXPECT_DOUBLE_EQ(by["linear"].total_s, 10.0);
  EXPECT_DOUBLE_EQ(by["linear"].self_s, 10.0 - 6.0 - 1.0);
  EXPECT_EQ(by["mm"].calls, 2);
  EXPECT_DOUBLE_EQ(by["mm"].total_s, 8.0);
  EXPECT_DOUBLE_EQ(by["mm"].self_s, 7.0);
  EXPECT_DOUBLE_EQ(by["mm"].self_s_by_caller["linear"], 5.0);
  EXPECT_DOUBLE_EQ(by["mm"].self_s_by_caller[""], 2.0);
  EXPECT_DOUBLE_EQ(by["empty"].self_s_by_caller["mm"], 1.0);
  EXPECT_DOUBLE_EQ(by["add"].self_s, 1.0);
}

TEST(OpProfile, RecordsAProductsForwardAndBackward) {
  // One product forward and its two backward products: aten::mm three times, and the
  // self times of everything recorded add up to no more than the stretch's wall time.
  const at::Tensor a = at::randn({64, 32}).requires_grad_(true), b = at::randn({32, 16}).requires_grad_(true);
  runtime::OpProfile p;
  p.start();
  EXPECT_THROW(p.start(), InternalError);
  const double t0 = now_s();
  at::mm(a, b).sum().backward();
  const double wall = now_s() - t0;
  p.stop();
  EXPECT_FALSE(p.running());
  const std::vector<runtime::OpTime> ops = p.totals();
  double self = 0;
  int64_t mm_calls = 0;
  for (const runtime::OpTime& o : ops) {
    EXPECT_GE(o.self_s, 0.0) << o.name;
    EXPECT_LE(o.self_s, o.total_s + 1e-9) << o.name;
    self += o.self_s;
    if (o.name == "aten::mm") mm_calls = o.calls;
  }
  EXPECT_EQ(mm_calls, 3);
  EXPECT_GT(self, 0.0);
  EXPECT_LE(self, wall);
  for (size_t i = 1; i < ops.size(); ++i) EXPECT_GE(ops[i - 1].self_s, ops[i].self_s);  // most self time first
  const nlohmann::json j = p.to_json(1);
  EXPECT_EQ(j["steps"], 1);
  EXPECT_EQ(j["ops"].size(), ops.size());
}

TEST(Launch, DetectsOpenMpiSlurmAndNothing) {
  std::map<std::string, std::string> env = {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  auto get = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto l = runtime::detect_launch(get);
  EXPECT_EQ(l.launcher, "openmpi");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 8);
  EXPECT_EQ(l.local_rank, 1);
  env = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}};
  EXPECT_EQ(runtime::detect_launch(get).launcher, "slurm");
  env = {};
  EXPECT_EQ(runtime::detect_launch(get).launcher, "none");
  env = {{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "6"}};
  EXPECT_THROW(runtime::detect_launch(get), Error);
}

TEST(Check, AFailedMpiCallThrowsACommErrorNamingTheCallTheRankAndTheReason) {
  int rank = -1;
  AXONN_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));  // success: nothing thrown
  char reason[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(MPI_ERR_COUNT, reason, &len);
  try {
    AXONN_CHECK(MPI_ERR_COUNT);
    FAIL() << "a failed call passed the check";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Communication);
    EXPECT_NE(what.find("[comm] MPI_ERR_COUNT failed: " + std::string(reason)), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(rank) + " on host "), std::string::npos) << what;
    EXPECT_NE(what.find("test_runtime_mpi.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("expected success"), std::string::npos) << what;
  }
}

TEST(Comm, CollectivesAreExact) {
  runtime::Communicator& w = *g_world;
  const int p = w.size(), r = w.rank();
  at::Tensor t = at::full({5}, static_cast<float>(r + 1));
  w.all_reduce(t)->wait();
  EXPECT_TRUE(t.equal(at::full({5}, static_cast<float>(p * (p + 1) / 2))));
  t = at::full({1}, static_cast<float>(r));
  w.all_reduce(t, runtime::ReduceOp::Max)->wait();
  EXPECT_EQ(t.item<float>(), static_cast<float>(p - 1));
  at::Tensor gathered = at::empty({2 * p}, at::kLong);
  w.all_gather(at::tensor({int64_t(r), int64_t(10 * r)}, at::kLong), gathered)->wait();
  for (int i = 0; i < p; ++i) {
    EXPECT_EQ(gathered[2 * i].item<int64_t>(), i);
    EXPECT_EQ(gathered[2 * i + 1].item<int64_t>(), 10 * i);
  }
  at::Tensor in = at::arange(3 * p, at::kFloat), out = at::empty({3}, at::kFloat);
  w.reduce_scatter(in, out)->wait();
  EXPECT_TRUE(out.equal(at::arange(3 * r, 3 * r + 3, at::kFloat) * p));
  // Uneven chunks, member i getting i elements (member 0 none).
  std::vector<int64_t> counts;
  for (int i = 0; i < p; ++i) counts.push_back(i);
  const int64_t total = p * (p - 1) / 2, before = r * (r - 1) / 2;
  at::Tensor uneven = at::empty({r}, at::kFloat);
  w.reduce_scatter_v(at::arange(total, at::kFloat) + r, counts, uneven)->wait();
  EXPECT_TRUE(uneven.equal(at::arange(before, before + r, at::kFloat) * p + p * (p - 1) / 2));
  // And back: member i contributes its i elements, every member receives them all in order.
  at::Tensor all = at::empty({total}, at::kFloat);
  w.all_gather_v(at::arange(before, before + r, at::kFloat) * 10, counts, all)->wait();
  EXPECT_TRUE(all.equal(at::arange(total, at::kFloat) * 10));
  // Broadcast from the last member; reduce (sum) to the last member.
  at::Tensor b = at::full({3}, static_cast<float>(r == p - 1 ? 42 : r));
  w.broadcast(b, p - 1)->wait();
  EXPECT_TRUE(b.equal(at::full({3}, 42.0f)));
  at::Tensor s = at::full({3}, static_cast<float>(r + 1));
  w.reduce(s, p - 1)->wait();
  if (r == p - 1) {
    EXPECT_TRUE(s.equal(at::full({3}, static_cast<float>(p * (p + 1) / 2))));
  }
  at::Tensor msg = at::full({4}, static_cast<float>(r)), got = at::empty({4});
  auto h = w.recv(got, (r + p - 1) % p, 7);
  w.send(msg, (r + 1) % p, 7)->wait();
  h->wait();
  EXPECT_TRUE(got.equal(at::full({4}, static_cast<float>((r + p - 1) % p))));
  auto half = w.split(r % 2, r, "half");
  EXPECT_EQ(half->size(), (p + 1 - r % 2) / 2);
}

// The backend's all-gathers and reduce-scatters are rings of its own (mpi_ring.hpp):
// large, uneven and in-place ones equal MPI's own collectives (the all-gather exactly,
// the reduce-scatter to float rounding: its order of summation is the ring's); rings
// in flight together on one communicator complete in any order (their messages keep
// apart by tag); and the progress thread carries a ring through all its steps while
// its owner computes, so that one test() afterwards finds it complete.
TEST(Comm, RingCollectivesEqualMpisAndProgressOnTheirOwn) {
  runtime::MpiCommunicator& w = *g_world;
  const int p = w.size(), r = w.rank();
  torch::manual_seed(11);  // the same values on every rank
  std::vector<int64_t> counts;
  for (int i = 0; i < p; ++i) counts.push_back(20011 + 977 * ((i * 5) % 3));
  int64_t total = 0, before = 0;
  for (int i = 0; i < p; ++i) (i < r ? before : total) += counts[static_cast<size_t>(i)];
  total += before;
  const at::Tensor all = at::randn({p, total});
  const at::Tensor reference = all.to(at::kDouble).sum(0).to(at::kFloat);
  // Reduce-scatter, uneven, and all-gather of the result back: two rings in flight,
  // waited for in the opposite order, beside a third (even) all-gather.
  at::Tensor mine = at::empty({counts[static_cast<size_t>(r)]});
  auto rs = w.reduce_scatter_v(all[r].clone(), counts, mine);
  at::Tensor block = at::arange(7, at::kFloat) + 7 * r, blocks = at::empty({7 * p});
  auto ag = w.all_gather(block, blocks);
  ag->wait();
  rs->wait();
  EXPECT_LT(relative_error(mine, reference.narrow(0, before, mine.numel())), 1e-6);
  EXPECT_TRUE(blocks.equal(at::arange(7 * p, at::kFloat)));
  at::Tensor gathered = at::empty({total}), expected = at::empty({total});
  w.all_gather_v(mine, counts, gathered)->wait();
  std::vector<int> ints(counts.begin(), counts.end()), displacements;
  for (int i = 0, d = 0; i < p; d += ints[static_cast<size_t>(i)], ++i) displacements.push_back(d);
  MPI_Allgatherv(mine.data_ptr(), ints[static_cast<size_t>(r)], MPI_FLOAT, expected.data_ptr(), ints.data(),
                 displacements.data(), MPI_FLOAT, w.handle());
  EXPECT_TRUE(gathered.equal(expected));
  // In place: this member's chunk of the output is the input.
  at::Tensor in_place = at::full({3 * p}, -1.0f);
  in_place.narrow(0, 3 * r, 3).fill_(static_cast<float>(r));
  w.all_gather(in_place.narrow(0, 3 * r, 3), in_place)->wait();
  EXPECT_TRUE(in_place.equal(at::arange(p, at::kFloat).repeat_interleave(3)));
  // Even reduce-scatter against MPI's blocking one on integers (exact in any order).
  at::Tensor ints_in = at::randint(-50, 50, {p * 4099}).to(at::kFloat) * (r + 1);
  at::Tensor ring_out = at::empty({4099}), mpi_out = at::empty({4099});
  w.reduce_scatter(ints_in, ring_out)->wait();
  MPI_Reduce_scatter_block(ints_in.data_ptr(), mpi_out.data_ptr(), 4099, MPI_FLOAT, MPI_SUM, w.handle());
  EXPECT_TRUE(ring_out.equal(mpi_out));
  // The progress thread: issued, left alone while this rank "computes" (sleeps, calling
  // nothing that moves a ring), until the thread says it posted the ring's last step;
  // then one test() finds it complete. How long that takes depends on how busy the
  // machine is, so the owner looks at the thread's count, not at a clock: a deadline of
  // a minute only keeps a broken thread from hanging the test.
  runtime::MpiProgressThread progress(std::chrono::microseconds(50));
  if (progress.active() && p >= 3) {
    at::Tensor out = at::empty({counts[static_cast<size_t>(r)]});
    const int64_t completed_before = progress.rings_completed();
    auto h = w.reduce_scatter_v(all[r].clone(), counts, out);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (progress.rings_completed() == completed_before && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(progress.rings_completed(), completed_before + 1)
        << "the progress thread did not complete the ring while its owner slept";
    EXPECT_TRUE(h->test()) << "the ring the progress thread completed is not complete";
    h->wait();
    EXPECT_LT(relative_error(out, reference.narrow(0, before, out.numel())), 1e-6);
  }
  w.barrier();
}

// A ring moves only when advanced, so every wait of the backend advances the rank's
// rings in flight: rank 0 waits for a message that rank 1 sends only once their ring
// has completed, and the ring needs rank 0's steps. Without that, both would wait
// until the watchdog (set here to 30 s) failed them. Two members have a one-step ring,
// posted when issued, so it needs three.
// Under either wait policy: a sleeping wait still advances the rings between its sleeps.
TEST(Comm, AWaitMovesTheRanksRingsOn) {
  runtime::MpiCommunicator& w = *g_world;
  const int p = w.size(), r = w.rank();
  if (p < 3) GTEST_SKIP() << "a ring of " << p << " member(s) has no second step";
  runtime::set_completion_timeout(std::chrono::seconds(30));
  for (auto policy : {runtime::WaitPolicy::Yield, runtime::WaitPolicy::Sleep}) {
    ScopedWaitPolicy waiting(policy);
    at::Tensor in = at::ones({p * 1000}), out = at::empty({1000});
    auto ring = w.reduce_scatter(in, out);
    if (r == 0) {
      at::Tensor got = at::zeros({1});
      w.recv(got, 1, 21)->wait();
      EXPECT_EQ(got.item<float>(), 1.0f);
    }
    ring->wait();
    if (r == 1) w.send(at::ones({1}), 0, 21)->wait();
    EXPECT_TRUE(out.equal(at::full({1000}, static_cast<float>(p)))) << runtime::to_string(policy);
  }
  runtime::set_completion_timeout(std::chrono::milliseconds(0));
  w.barrier();
}

// The emulated cluster's links carry their rate and no more, even after they idled:
// tc's token bucket (tools/emulated_cluster.sh --burst) would otherwise pass an idle
// link's first bytes at once. Run by tests/runtime/emulated_cluster_smoke.sh, which
// says the rate and the ranks per node; skipped elsewhere. Rank 0 sends 256 KiB to the
// first rank of the next node after 30 ms of silence, three times; the fastest must take
// at least 0.7 of bytes / rate (a 256 KiB bucket, the old depth, sends it in 0.2 ms).
TEST(Comm, AnIdleLinkCarriesNoMoreThanItsRate) {
  const char* rate_env = std::getenv("AXONN_TEST_LINK_BYTES_PER_S");
  const char* node_env = std::getenv("AXONN_TEST_RANKS_PER_NODE");
  if (!rate_env || !node_env) GTEST_SKIP() << "only on the emulated cluster (emulated_cluster_smoke.sh)";
  runtime::MpiCommunicator& w = *g_world;
  const double rate_bytes_per_s = std::stod(rate_env);
  const int per_node = std::stoi(node_env), r = w.rank();
  if (w.size() <= per_node) GTEST_SKIP() << "one node";
  constexpr int64_t kBytes = 256 * 1024;
  const at::Tensor block = at::ones({kBytes / 4}), ack = at::zeros({1});
  double fastest_s = 1e9;
  for (int round = 0; round < 3; ++round) {
    w.barrier();
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      const double t0 = now_s();
      w.send(block, per_node, 31)->wait();
      w.recv(ack, per_node, 32)->wait();
      fastest_s = std::min(fastest_s, now_s() - t0);
    } else if (r == per_node) {
      at::Tensor got = at::empty({kBytes / 4});
      w.recv(got, 0, 31)->wait();
      w.send(ack, 0, 32)->wait();
    }
  }
  if (r == 0) {
    const double line_s = static_cast<double>(kBytes) / rate_bytes_per_s;
    EXPECT_GT(fastest_s, 0.7 * line_s) << "256 KiB crossed an idle link in " << fastest_s * 1e3 << " ms; at its rate it takes "
                                       << line_s * 1e3 << " ms (a token bucket deeper than the rate allows?)";
  }
  w.barrier();
}

// A rank's CPU quotas cap the cores it counts as its own, each shared with the machine's
// other ranks held to it. Run by emulated_cluster_smoke.sh, which says the quotas that
// hold each rank, its own cgroup's first (AXONN_TEST_CGROUP_CORES, comma-separated), and
// each rank's part (AXONN_TEST_CORE_SHARE): under `tools/emulated_cluster.sh --core-share
// 0.3` a cgroup per rank, 0.3 and 0.3; under plain mpirun in one cgroup of 1.2 cores,
// 1.2 and 0.3 for 4 ranks; each of 4 ranks in a cgroup of its own below one of 1.2,
// 1.2 and 0.3. measure_cores_per_rank returns that part where the machine's cores over
// its ranks are more (an emulated cluster's nodes are one machine), else those. Skipped
// elsewhere.
TEST(MachineCores, ARankCountsItsPartOfEachCpuQuotaThatHoldsIt) {
  const char* cgroup_env = std::getenv("AXONN_TEST_CGROUP_CORES");
  const char* share_env = std::getenv("AXONN_TEST_CORE_SHARE");
  if (!cgroup_env || !share_env) GTEST_SKIP() << "only under a CPU quota (emulated_cluster_smoke.sh)";
  std::vector<double> expected;
  std::istringstream list(cgroup_env);
  for (std::string each; std::getline(list, each, ',');) expected.push_back(std::stod(each));
  const double share = std::stod(share_env);
  const std::vector<runtime::CpuQuota> quotas = runtime::cgroup_cpu_quotas();
  ASSERT_EQ(quotas.size(), expected.size()) << "rank " << g_world->rank();
  for (size_t i = 0; i < quotas.size(); ++i)
    EXPECT_NEAR(quotas[i].cores, expected[i], 1e-3) << "rank " << g_world->rank() << ", cgroup " << quotas[i].cgroup;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const double machine = static_cast<double>(CPU_COUNT(&mask)) / g_world->size();
  EXPECT_NEAR(runtime::measure_cores_per_rank(*g_world), std::min(share, machine), 1e-3);
}

// The quotas are found through the mounts, on the cgroup and its ancestors: a made-up
// /proc/self (its cgroup and mountinfo files) and cgroup trees in a directory of this
// rank's. Not collective.
TEST(MachineCores, QuotasAreFoundThroughTheMountsOnTheCgroupAndItsAncestors) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("axonn_cgroups_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto write = [&](const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  };
  auto mountinfo = [&](const std::string& lines) { write(dir / "proc/mountinfo", lines); };
  const std::string v1 = (dir / "v1").string(), v2 = (dir / "v2 tree").string();
  // cgroup v2: "max" is no quota; /job's 2 cores hold /job/step/task0 with its own 0.5.
  write(dir / "v2 tree/job/cpu.max", "200000 100000\n");
  write(dir / "v2 tree/job/step/cpu.max", "max 100000\n");
  write(dir / "v2 tree/job/step/task0/cpu.max", "50000 100000\n");
  write(dir / "v2 tree/job/step/task0/cgroup.procs", "");
  write(dir / "proc/cgroup", "0::/job/step/task0\n");
  mountinfo("31 23 0:28 / " + std::string(dir / "v2\\040tree") + " rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
  std::vector<runtime::CpuQuota> q = runtime::cgroup_cpu_quotas((dir / "proc").string());
  ASSERT_EQ(q.size(), 2u);
  EXPECT_DOUBLE_EQ(q[0].cores, 0.5);
  EXPECT_EQ(q[0].cgroup, "v2:/job/step/task0");
  EXPECT_DOUBLE_EQ(q[1].cores, 2.0);
  EXPECT_EQ(q[1].cgroup, "v2:/job");
  // cgroup v1 in a container without a cgroup namespace: its cgroup, named in full, is
  // the mount's root; cpu shares its hierarchy with cpuacct. The memory hierarchy's
  // mount and a v1 mount without cpu hold nothing of the CPU.
  write(dir / "v1/cpu.cfs_quota_us", "150000\n");
  write(dir / "v1/cpu.cfs_period_us", "100000\n");
  write(dir / "proc/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  mountinfo("40 31 0:35 /docker/abc " + v1 + "-memory rw - cgroup cgroup rw,memory\n" +
            "41 31 0:36 /docker/abc " + v1 + " rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n");
  q = runtime::cgroup_cpu_quotas((dir / "proc").string());
  ASSERT_EQ(q.size(), 1u);
  EXPECT_DOUBLE_EQ(q[0].cores, 1.5);
  EXPECT_EQ(q[0].cgroup, "v1:/docker/abc");
  // No quota anywhere (-1 is v1's none), or nothing readable: none.
  write(dir / "v1/cpu.cfs_quota_us", "-1\n");
  EXPECT_TRUE(runtime::cgroup_cpu_quotas((dir / "proc").string()).empty());
  EXPECT_TRUE(runtime::cgroup_cpu_quotas((dir / "absent").string()).empty());
  fs::remove_all(dir);
}

// The thread's CPU time (clock_gettime's per-thread clock), seconds.
double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A sleeping wait for a message gives its core away: over 100 ms of polling for
// nothing, the waiting thread runs for a small part of the time (it spins only the
// first 200 us, then sleeps an eighth of the time waited, at most 1 ms, between polls). What a yielding wait takes
// depends on whether another thread wants the core, so only the sleeping one is bounded.
TEST(IdleWait, ASleepingWaitLeavesTheCore) {
  ScopedWaitPolicy sleeping(runtime::WaitPolicy::Sleep);
  runtime::IdleWait idle;
  int polls = 0;
  const double wall0 = now_s(), cpu0 = thread_cpu_s();
  while (now_s() - wall0 < 0.1) idle.pause(), ++polls;
  const double wall = now_s() - wall0, cpu = thread_cpu_s() - cpu0;
  EXPECT_LT(cpu, 0.3 * wall) << polls << " polls";
  EXPECT_LT(polls, 10000) << "a sleeping wait polled as often as a spinning one";
  EXPECT_GT(polls, 20) << "a sleeping wait slept longer than 1 ms between polls";
  // The rule: a message wait sleeps an eighth of its time once past 200 us, at most
  // 1 ms; a collective's wait, or any under Yield, never sleeps.
  using us = std::chrono::microseconds;
  const auto sleep = runtime::WaitPolicy::Sleep;
  EXPECT_EQ(runtime::sleep_between_polls(sleep, runtime::WaitKind::Message, us(150)), us(0));
  EXPECT_EQ(runtime::sleep_between_polls(sleep, runtime::WaitKind::Message, us(800)), us(100));
  EXPECT_EQ(runtime::sleep_between_polls(sleep, runtime::WaitKind::Message, us(80000)), us(1000));
  EXPECT_EQ(runtime::sleep_between_polls(sleep, runtime::WaitKind::Collective, us(80000)), us(0));
  EXPECT_EQ(runtime::sleep_between_polls(runtime::WaitPolicy::Yield, runtime::WaitKind::Message, us(80000)), us(0));
  // --wait auto: sleep where a rank's threads outnumber the cores it has to itself.
  EXPECT_EQ(runtime::automatic_wait_policy(0.25, 1), runtime::WaitPolicy::Sleep);  // 8 ranks on 2 cores
  EXPECT_EQ(runtime::automatic_wait_policy(2.0, 4), runtime::WaitPolicy::Sleep);
  EXPECT_EQ(runtime::automatic_wait_policy(1.0, 1), runtime::WaitPolicy::Yield);
  EXPECT_EQ(runtime::automatic_wait_policy(16.0, 4), runtime::WaitPolicy::Yield);
  EXPECT_EQ(runtime::parse_wait_policy("sleep", "--wait"), runtime::WaitPolicy::Sleep);
  EXPECT_EQ(runtime::parse_wait_policy("yield", "--wait"), runtime::WaitPolicy::Yield);
  try {
    runtime::parse_wait_policy("spin", "--wait");
    ADD_FAILURE() << "parse_wait_policy accepted \"spin\"";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--wait"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("yield or sleep"), std::string::npos) << e.what();
  }
}

// bf16 has no MPI type: the backend's own 2-byte type and operators. Small integers
// are exact, so every collective must give them exactly; a sum that needs rounding
// rounds as LibTorch's bf16 add (to nearest even), checked where it is one addition.
TEST(Comm, Bf16CollectivesAreExact) {
  runtime::Communicator& w = *g_world;
  const int p = w.size(), r = w.rank();
  const auto bf16 = at::kBFloat16;
  at::Tensor t = at::full({5}, r + 1, bf16);
  w.all_reduce(t)->wait();
  EXPECT_TRUE(t.equal(at::full({5}, p * (p + 1) / 2, bf16)));
  t = at::full({3}, r, bf16);
  w.all_reduce(t, runtime::ReduceOp::Max)->wait();
  EXPECT_TRUE(t.equal(at::full({3}, p - 1, bf16)));
  at::Tensor gathered = at::empty({2 * p}, bf16);
  w.all_gather(at::full({2}, r, bf16), gathered)->wait();
  EXPECT_TRUE(gathered.equal(at::arange(p, at::kFloat).repeat_interleave(2).to(bf16)));
  at::Tensor in = at::arange(3 * p, at::kFloat).to(bf16), out = at::empty({3}, bf16);
  w.reduce_scatter(in, out)->wait();
  EXPECT_TRUE(out.equal((at::arange(3 * r, 3 * r + 3, at::kFloat) * p).to(bf16)));
  std::vector<int64_t> counts;
  for (int i = 0; i < p; ++i) counts.push_back(i);
  const int64_t total = p * (p - 1) / 2, before = r * (r - 1) / 2;
  at::Tensor uneven = at::empty({r}, bf16);
  w.reduce_scatter_v((at::arange(total, at::kFloat) + r).to(bf16), counts, uneven)->wait();
  EXPECT_TRUE(uneven.equal((at::arange(before, before + r, at::kFloat) * p + p * (p - 1) / 2).to(bf16)));
  at::Tensor msg = at::full({4}, r, bf16), got = at::empty({4}, bf16);
  auto h = w.recv(got, (r + p - 1) % p, 9);
  w.send(msg, (r + 1) % p, 9)->wait();
  h->wait();
  EXPECT_TRUE(got.equal(at::full({4}, (r + p - 1) % p, bf16)));
  // Larger messages (the collectives may pipeline them in segments): random values, the
  // sum of each element computed alike on every rank; with two ranks one addition, so
  // exactly LibTorch's.
  torch::manual_seed(5);  // the same values on every rank
  const at::Tensor all = at::randn({p, 5000}).to(bf16);
  at::Tensor big = all[r].clone();
  w.all_reduce(big)->wait();
  const at::Tensor reference = all.to(at::kFloat).sum(0);
  EXPECT_LT(relative_error(big, reference), 1e-2);
  std::vector<int64_t> big_counts(static_cast<size_t>(p), 5000 / p);
  big_counts.back() += 5000 % p;
  at::Tensor piece = at::empty({big_counts[static_cast<size_t>(r)]}, bf16);
  w.reduce_scatter_v(all[r].clone(), big_counts, piece)->wait();
  EXPECT_TRUE(piece.equal(big.narrow(0, r * (5000 / p), piece.numel())) || p > 2);
  EXPECT_LT(relative_error(piece, reference.narrow(0, r * (5000 / p), piece.numel())), 1e-2);
  if (p == 2) {  // 1 + (1 + 2^-7): halfway between two bf16 values, rounds to the even one
    const at::Tensor mine = at::full({1}, r == 0 ? 1.0 : 1.0 + 1.0 / 128, bf16);
    at::Tensor sum = mine.clone();
    w.all_reduce(sum)->wait();
    const at::Tensor expected = at::full({1}, 1.0, bf16) + at::full({1}, 1.0 + 1.0 / 128, bf16);
    EXPECT_TRUE(sum.equal(expected)) << sum.item<float>() << " vs " << expected.item<float>();
    EXPECT_EQ(expected.item<float>(), 2.0f);
  }
}

TEST(Grid, RefusesAGridOfTheWrongSize) {
  try {
    ProcessGrid g(*g_world, topo::Grid{1, 1, 1, g_world->size() + 1, 1}, topo::default_order());
    ADD_FAILURE() << "expected axonn::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but the job has " + std::to_string(g_world->size())), std::string::npos) << e.what();
  }
}

TEST(Grid, GroupsFollowTheRankLayout) {
  for (const auto& g : planner::enumerate_grids(g_world->size())) {
    ProcessGrid pg(*g_world, g, topo::default_order());
    for (int i = 0; i < topo::kNumAxes; ++i) {
      auto a = static_cast<Axis>(i);
      EXPECT_EQ(pg.axis(a).size(), g.size(a));
      EXPECT_EQ(pg.axis(a).rank(), pg.coord(a));
      // the world rank of every member, gathered over the group, is the layout's group
      at::Tensor ranks = at::empty({g.size(a)}, at::kLong);
      pg.axis(a).all_gather(at::tensor({int64_t(g_world->rank())}, at::kLong), ranks)->wait();
      auto want = pg.layout().group_ranks(g_world->rank(), a);
      for (int64_t j = 0; j < g.size(a); ++j) EXPECT_EQ(ranks[j].item<int64_t>(), want[j]);
    }
    EXPECT_EQ(pg.z_data().size(), g.gz * g.gdata);
    EXPECT_EQ(pg.model().size(), g.gx * g.gy * g.gz * g.ginter);
  }
}

// A sequence group is the mesh's "sequence" axis, right inside "data": its communicator
// holds the ranks that share every other coordinate and the data coordinate's quotient
// by the group (the rule before the mesh: the data communicator split by d / sequence),
// in the order of d % sequence; on a grid with a pipeline, in two orders.
TEST(Grid, TheSequenceGroupIsTheMeshsSequenceAxis) {
  const int64_t n = g_world->size();
  if (n % 4 != 0) GTEST_SKIP() << "needs a multiple of 4 ranks";
  auto members = [](runtime::Communicator& c) {
    at::Tensor ranks = at::empty({c.size()}, at::kLong);
    c.all_gather(at::tensor({int64_t(g_world->rank())}, at::kLong), ranks)->wait();
    return std::vector<int64_t>(ranks.data_ptr<int64_t>(), ranks.data_ptr<int64_t>() + c.size());
  };
  for (const char* order : {"x,y,z,pipe,data", "data,x,y,z,pipe"}) {
    topo::Grid g{1, 1, 1, n / 2, 2};
    g.sequence = 2;
    ProcessGrid pg(*g_world, g, topo::parse_order(order, "test", "order"));
    ASSERT_EQ(pg.layout().mesh().size(topo::kSequenceAxis), 2) << order;
    const auto mine = pg.layout().coords_of(g_world->rank());
    std::vector<int64_t> want;  // by the rule, over every rank's coordinates
    for (int64_t r = 0; r < n; ++r) {
      const auto c = pg.layout().coords_of(r);
      if (c[static_cast<int>(Axis::Pipe)] == mine[static_cast<int>(Axis::Pipe)] &&
          c[static_cast<int>(Axis::Data)] / 2 == mine[static_cast<int>(Axis::Data)] / 2)
        want.push_back(r);
    }
    std::sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
      return pg.layout().coords_of(a)[static_cast<int>(Axis::Data)] % 2 <
             pg.layout().coords_of(b)[static_cast<int>(Axis::Data)] % 2;
    });
    EXPECT_EQ(members(pg.sequence()), want) << order;
    EXPECT_EQ(pg.sequence().rank(), mine[static_cast<int>(Axis::Data)] % 2) << order;
    EXPECT_EQ(pg.data().size(), n / 2) << order;
    EXPECT_EQ(pg.pipe().size(), 2) << order;
  }
}

namespace {

// The schedule of a stage holding one weighted layer, synchronous, one micro-batch.
schedule::StageSchedule one_layer_schedule(bool data_parallel) {
  schedule::StageSchedule s;
  s.layers = {schedule::PassLayer{}};
  s.layer_names = {"w"};
  s.settings.overlap = plan::OverlapSettings::synchronous();
  s.settings.data_parallel = data_parallel;
  s.forward = schedule::pass_program(s.layers.data(), 1, s.settings, schedule::PassKind::Forward);
  s.backward = schedule::pass_program(s.layers.data(), 1, s.settings, schedule::PassKind::Backward);
  s.last_backward = schedule::pass_program(s.layers.data(), 1, s.settings, schedule::PassKind::LastBackward);
  s.steps = schedule::step_program(plan::PipelineSchedule::MessageDriven, 0, 1, 1);
  return s;
}

}  // namespace

// One normal and one transposed layer, every grid: output, input gradient, weight and
// bias gradients against serial LibTorch.
// The split layer norm's arithmetic (LayerNormFn's, and what calibrate times as
// layer_norm_split) on a group of one is LibTorch's layer norm: outputs and the input's,
// gamma's and beta's gradients. Rank-local: every rank checks it alone.
TEST(SplitLayerNorm, AloneItIsLibTorchsLayerNormAndItsGradients) {
  torch::manual_seed(11);
  const int64_t hidden = 24;
  const at::Tensor x = at::randn({3, 5, hidden}), gamma = at::randn({hidden}), beta = at::randn({hidden}),
                   dy = at::randn({3, 5, hidden});
  int sums = 0;
  const runtime::SumOverGroup alone = [&](at::Tensor&) { ++sums; };
  runtime::SplitNormSaved saved;
  const at::Tensor y = runtime::split_layer_norm_forward(x, gamma, beta, hidden, 1e-5, alone, saved);
  const runtime::SplitNormGrads g = runtime::split_layer_norm_backward(dy, gamma, saved, hidden, alone);
  EXPECT_EQ(sums, 2);  // the forward's statistics (one call) and the backward's two sums (one call)

  const at::Tensor xr = x.clone().requires_grad_(true), gr = gamma.clone().requires_grad_(true),
                   br = beta.clone().requires_grad_(true);
  const at::Tensor yr = at::layer_norm(xr, {hidden}, gr, br, 1e-5);
  yr.backward(dy);
  EXPECT_LT(relative_error(y, yr.detach()), 1e-5);
  EXPECT_LT(relative_error(g.dx, xr.grad()), 1e-5);
  EXPECT_LT(relative_error(g.dgamma, gr.grad()), 1e-5);
  EXPECT_LT(relative_error(g.dbeta, br.grad()), 1e-5);
}

// Split over every rank of the world (each holds a block of columns; the sums are the
// world's all-reduces): outputs and gradients against LibTorch's layer norm in fp64 on
// the whole input, with a mean 1000 times the spread, where fp32 sums of squares (the
// one-call form without fp64) lose the variance (var = E[x^2] - mean^2 off by ~10%).
TEST(SplitLayerNorm, SplitOverTheWorldMatchesFp64EvenWhereTheMeanDwarfsTheSpread) {
  const int64_t p = g_world->size(), hidden = 16 * p, local = hidden / p, rank = g_world->rank();
  auto gen = at::detail::createCPUGenerator(5);
  for (double offset : {0.0, 1000.0}) {
    const at::Tensor x = at::randn({4, 3, hidden}, gen) + offset, gamma = at::randn({hidden}, gen),
                     beta = at::randn({hidden}, gen), dy = at::randn({4, 3, hidden}, gen);
    std::vector<at::ScalarType> summed;
    const runtime::SumOverGroup world = [&](at::Tensor& t) {
      summed.push_back(t.scalar_type());
      runtime::all_reduce_now(*g_world, t);
    };
    auto block = [&](const at::Tensor& t) { return t.narrow(-1, rank * local, local).contiguous(); };
    runtime::SplitNormSaved saved;
    const at::Tensor y = runtime::split_layer_norm_forward(block(x), block(gamma), block(beta), hidden, 1e-5, world, saved);
    const runtime::SplitNormGrads g = runtime::split_layer_norm_backward(block(dy), block(gamma), saved, hidden, world);
    const std::vector<at::ScalarType> calls{at::kDouble, at::kFloat};  // one in each pass
    EXPECT_EQ(summed, calls) << offset;

    const at::Tensor xr = x.to(at::kDouble).requires_grad_(true), gr = gamma.to(at::kDouble).requires_grad_(true);
    const at::Tensor yr = at::layer_norm(xr, {hidden}, gr, beta.to(at::kDouble), 1e-5);
    yr.backward(dy.to(at::kDouble));
    const std::string where = "mean " + std::to_string(offset) + " over " + std::to_string(p) + " ranks";
    EXPECT_LT(relative_error(y.to(at::kDouble), block(yr.detach())), 1e-4) << where;
    EXPECT_LT(relative_error(g.dx.to(at::kDouble), block(xr.grad())), 1e-4) << where;
    // dgamma: this rank's rows' contribution to its columns, all rows here.
    EXPECT_LT(relative_error(g.dgamma.to(at::kDouble), block(gr.grad())), 1e-4) << where;
  }
}

TEST(Linear, MatchesSerialOnEveryGrid) {
  const int64_t m = 16, k = 16, n = 32;
  auto gen = at::detail::createCPUGenerator(11);
  at::Tensor I = at::randn({m, k}, gen), W = at::randn({k, n}, gen), b = at::randn({n}, gen),
             R = at::randn({m, n}, gen);
  for (bool transposed : {false, true}) {
    at::Tensor Is = I.clone().set_requires_grad(true), Ws = W.clone().set_requires_grad(true),
               bs = b.clone().set_requires_grad(true);
    at::Tensor Os = at::matmul(Is, Ws) + bs;
    (Os * R).sum().backward();
    for (const auto& g : planner::enumerate_grids(g_world->size())) {
      if (g.ginter != 1 || m % (g.gz * g.gdata) != 0 || k % g.gx || k % g.gy || n % g.gx || n % g.gy) continue;
      ProcessGrid pg(*g_world, g, topo::default_order());
      const Axis a = transposed ? Axis::Y : Axis::X, bx = transposed ? Axis::X : Axis::Y;
      const int64_t rows = m / (g.gz * g.gdata);
      const int64_t row0 = (pg.coord(Axis::Data) * g.gz + pg.coord(Axis::Z)) * rows;
      const int64_t kl = k / g.size(a), nl = n / g.size(bx);
      at::Tensor Il = I.narrow(0, row0, rows).narrow(1, pg.coord(a) * kl, kl).clone().set_requires_grad(true);
      const auto coords = pg.layout().coords_of(g_world->rank());
      const auto role = transposed ? model::LinearRole::Row : model::LinearRole::Column;
      auto wspec = runtime::ShardSpec::matrix(role);
      auto bspec = runtime::ShardSpec::vector(bx);
      std::vector<runtime::Parameter> params{
          {"w", runtime::shard_of(W, wspec, g, coords).set_requires_grad(true), wspec, W.sizes().vec()},
          {"b", runtime::shard_of(b, bspec, g, coords).set_requires_grad(true), bspec, b.sizes().vec()}};
      at::Tensor &Wl = params[0].tensor, &bl = params[1].tensor;
      runtime::StageEngine engine(pg, one_layer_schedule(g.gdata > 1), nullptr);
      const int64_t id = 0;
      engine.engine().add_layer(id, &Wl);
      engine.set_parameters(&params);
      engine.begin_forward(0);
      at::Tensor Ol = runtime::tp_linear(engine.engine(), id, Il, bl, runtime::LinearShape{k, n, role});
      engine.end_forward();
      at::Tensor Rl = R.narrow(0, row0, rows).narrow(1, pg.coord(bx) * nl, nl);
      engine.begin_backward(0);
      (Ol * Rl).sum().backward();
      engine.end_backward();
      engine.reduce_gradients();
      const std::string where = g.to_string() + (transposed ? " transposed" : " normal");
      EXPECT_LT(relative_error(Ol, Os.narrow(0, row0, rows).narrow(1, pg.coord(bx) * nl, nl)), 1e-5) << where;
      EXPECT_LT(relative_error(Il.grad(), Is.grad().narrow(0, row0, rows).narrow(1, pg.coord(a) * kl, kl)), 1e-5)
          << where;
      EXPECT_LT(relative_error(Wl.grad(), runtime::shard_of(Ws.grad(), wspec, g, coords)), 1e-5) << where;
      EXPECT_LT(relative_error(bl.grad(), runtime::shard_of(bs.grad(), bspec, g, coords)), 1e-5) << where;
      // and the full weight gathers back to the serial one
      EXPECT_TRUE(runtime::unshard(pg, Wl.detach(), wspec, {k, n}).equal(W)) << where;
    }
  }
}

namespace {

struct GptCase {
  model::ModelDescription desc = model::load_model("gpt-tiny");
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  int64_t seqs = 8;
};
}  // namespace

// The whole GPT: loss and every parameter's gradient, every grid.
TEST(Gpt, LossAndEveryGradientMatchSerialOnEveryGrid) {
  GptCase c;
  SerialStep ref(c.cfg, c.seqs, 5, 3);
  auto& [serial, batch, serial_loss] = ref;
  std::vector<std::string> skipped;
  for (const auto& g : grids_for(c.desc, c.seqs, &skipped)) {
    ProcessGrid pg(*g_world, g, topo::default_order());
    gpt::GptStage run(test_plan(c.desc, g, c.seqs), pg, c.cfg, serial.named_parameters(), nullptr);
    at::Tensor total = loss_and_gradients(run, batch);
    EXPECT_LT(relative_error(total, serial_loss.detach().view({1})), 1e-5) << g.to_string();
    auto grads = run.model.gather(true);
    auto weights = run.model.gather(false);
    for (size_t i = 0; i < grads.size(); ++i) {
      const auto& [name, ref] = serial.named_parameters()[i];
      EXPECT_EQ(grads[i].first, name);
      EXPECT_TRUE(weights[i].second.equal(ref.detach())) << g.to_string() << " weights of " << name;
      EXPECT_LT(relative_error(grads[i].second, ref.grad()), 1e-5) << g.to_string() << " gradient of " << name;
    }
  }
  report_skipped(skipped);
}

namespace {
// The 1d tests' model: 8 heads, so t = 2, 4 and 8 split them.
model::ModelDescription one_d_model() {
  return model::model_from_json(nlohmann::json::parse(R"({"name": "gpt-1d", "family": "gpt",
      "num_layers": 2, "hidden": 64, "heads": 8, "seq_len": 16, "vocab": 64, "ffn_multiplier": 4})"),
                                "gpt-1d");
}
}  // namespace

// Megatron's 1D (--tensor-mode 1d) is AxoNN's 3D on grids 1,t,1,gdata,ginter: with a
// model of 8 heads, t = 2, 4 and 8 where the world allows, alone and with data
// parallelism and pipelines, give serial LibTorch's loss and every gradient.
TEST(OneD, LossAndEveryGradientMatchSerialForEveryTensorGroup) {
  const auto desc = one_d_model();
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  const int64_t seqs = 8;
  int tested = 0;
  SerialStep ref(cfg, seqs, 11, 12);
  for (const auto& p : world_plans(desc, seqs)) {
    if (p.grid.gx != 1 || p.grid.gz != 1 || p.grid.gy < 2) continue;
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptStage run(p, pg, cfg, ref.serial.named_parameters(), nullptr);
    EXPECT_LT(relative_error(loss_and_gradients(run, ref.batch), ref.loss.detach().view({1})), 1e-5) << p.grid.to_string();
    EXPECT_LT(worst_gradient_error(run.model, ref.serial), 1e-5) << p.grid.to_string();
    if (g_world->rank() == 0) std::printf("  [1d] t=%ld: %s\n", static_cast<long>(p.grid.gy), p.grid.to_string().c_str());
    ++tested;
  }
  if (g_world->size() > 1) {
    EXPECT_GT(tested, 0);
  }
}

// Megatron's 1D (the `1d` tensor mode's grids, 1,t,1,gdata,ginter): 20 Adam steps with
// clipping follow the serial loss curve on every one of them.
TEST(OneD, TwentyTrainingStepsFollowTheSerialLossCurve) {
  const auto desc = one_d_model();
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  SerialRun ref(cfg, 8, 13, 14);
  std::vector<std::string> skipped;
  const auto plans = plans_on(planner::enumerate_mode_grids("1d", g_world->size()), desc, 8, &skipped);
  if (g_world->size() > 1) {
    EXPECT_FALSE(plans.empty());
  }
  for (const auto& p : plans) {
    ASSERT_TRUE(p.grid.gx == 1 && p.grid.gz == 1 && p.grid.gy >= 2) << p.grid.to_string();
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptStage run(p, pg, cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
    EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4) << describe_plan(p);
  }
  report_skipped(skipped);
  EXPECT_TRUE(ref.trained());
}

// The element size is a parameter of the model: in fp64 the parallel GPT agrees with
// the serial one to rounding (1e-12), which fp32's 1e-5 could hide a small bug behind.
TEST(Gpt, DoublePrecisionAgreesToRounding) {
  GptCase c;
  c.cfg.dtype = at::kDouble;
  SerialStep ref(c.cfg, c.seqs, 8, 4);
  auto& [serial, batch, serial_loss] = ref;
  std::vector<std::string> skipped;
  for (const auto& g : grids_for(c.desc, c.seqs, &skipped)) {
    ProcessGrid pg(*g_world, g, topo::default_order());
    gpt::GptStage run(test_plan(c.desc, g, c.seqs), pg, c.cfg, serial.named_parameters(), nullptr);
    loss_and_gradients(run, batch);
    EXPECT_LT(worst_gradient_error(run.model, serial), 1e-12) << g.to_string();
  }
}

// Every combination of the four overlap switches (with activation checkpointing, so
// that the cache matters), and all of them without checkpointing: the same loss and
// gradients as serial LibTorch, hence as the synchronous path, on every grid (on 8 ranks
// each grid a third of the combinations: runs_variant).
TEST(Overlap, EveryCombinationOfTheFourSwitchesMatchesSerial) {
  GptCase c;
  SerialStep ref(c.cfg, c.seqs, 6, 5);
  auto& [serial, batch, serial_loss] = ref;
  struct Variant {
    plan::OverlapSettings overlap;
    bool checkpointing = true;
  };
  std::vector<Variant> variants;
  for (int bits = 0; bits < 16; ++bits) {
    Variant o;
    o.overlap.async_input_grad_all_reduce = bits & 1;
    o.overlap.async_weight_grad_reduce_scatter = bits & 2;
    o.overlap.prefetch_all_gather = bits & 4;
    o.overlap.cache_all_gather_layers = (bits & 8) ? 3 : 0;
    o.overlap.bucketed_data_parallel_all_reduce = ((bits >> 1) ^ bits) & 1;  // on and off with each RS mode
    o.overlap.bucket_bytes = 40000;                          // several buckets for gpt-tiny
    variants.push_back(o);
  }
  Variant no_checkpointing;
  no_checkpointing.checkpointing = false;  // everything on
  no_checkpointing.overlap.bucket_bytes = 40000;
  variants.push_back(no_checkpointing);
  std::vector<std::string> skipped;
  size_t index = 0;
  for (const auto& g : grids_for(c.desc, c.seqs, &skipped)) {
    ProcessGrid pg(*g_world, g, topo::default_order());
    const size_t grid_index = index++;
    for (size_t v = 0; v < variants.size(); ++v) {
      if (!runs_variant(grid_index, v, kLargeMatrixShare)) continue;  // on 8 ranks a third of the matrix (ctest -L full: all)
      plan::Plan p = test_plan(c.desc, g, c.seqs);
      p.overlap = variants[v].overlap;
      p.activation_checkpointing = variants[v].checkpointing;
      gpt::GptStage run(p, pg, c.cfg, serial.named_parameters(), nullptr);
      at::Tensor total = loss_and_gradients(run, batch);
      double worst = relative_error(total, serial_loss.detach().view({1}));
      worst = std::max(worst, worst_gradient_error(run.model, serial));
      EXPECT_LT(worst, 1e-5) << g.to_string() << " variant " << v;
    }
  }
}

// Gradient accumulation over two micro-batches with every optimization on (async
// reduce-scatters, buckets issued in the last micro-batch only): every gradient equals
// the serial full-batch gradient.
TEST(Overlap, TwoMicroBatchesAccumulateTheSerialGradients) {
  GptCase c;
  gpt::SerialGpt serial(c.cfg, 12);
  at::Tensor batch = runtime::make_token_source("", c.cfg.vocab, c.seqs, c.cfg.seq_len, 13)->batch(0);
  serial.loss(batch).backward();
  std::vector<std::string> skipped;
  for (const auto& g : grids_for(c.desc, c.seqs, &skipped)) {
    const int64_t per_group = c.seqs / g.gdata;
    if (per_group < 2 || (per_group / 2) % g.gz != 0) continue;
    ProcessGrid pg(*g_world, g, topo::default_order());
    plan::Plan p = test_plan(c.desc, g, c.seqs, per_group / 2);
    p.activation_checkpointing = true;
    p.overlap = plan::OverlapSettings{};
    p.overlap.cache_all_gather_layers = 2;
    p.overlap.bucket_bytes = 40000;
    gpt::GptStage run(p, pg, c.cfg, serial.named_parameters(), nullptr);
    loss_and_gradients(run, batch);
    EXPECT_LT(worst_gradient_error(run.model, serial), 1e-5) << g.to_string();
  }
}

// 20 Adam steps with clipping: the parallel loss curve follows the serial one.
TEST(Gpt, TwentyTrainingStepsFollowTheSerialLossCurve) {
  GptCase c;
  SerialRun ref(c.cfg, c.seqs, 9, 2);
  std::vector<std::string> skipped;
  size_t index = 0;
  for (const auto& g : grids_for(c.desc, c.seqs, &skipped)) {
    if (!runs_curve(index++, g.to_string())) continue;
    ProcessGrid pg(*g_world, g, topo::default_order());
    // two micro-batches where the batch allows it, to exercise gradient accumulation
    const int64_t per_group = c.seqs / g.gdata;
    plan::Plan p = test_plan(c.desc, g, c.seqs, (per_group / 2) % g.gz == 0 && per_group >= 2 ? per_group / 2 : 0);
    // the plan's defaults: every optimization on, checkpointing, a cache
    p.activation_checkpointing = true;
    p.overlap = plan::OverlapSettings{};
    p.overlap.cache_all_gather_layers = 2;
    p.overlap.bucket_bytes = 40000;
    gpt::GptStage run(p, pg, c.cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
    EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4)
        << g.to_string() << " micro-batch " << p.batch.microbatch_seqs;
  }
  // the optimizer moved the weights (so equal curves are not two idle optimizers)
  EXPECT_FALSE(ref.serial.named_parameters()[1].second.equal(ref.initial.named_parameters()[1].second));
  report_skipped(skipped);
}

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::set_compute_threads(1);
  g_malloc_tuned = process.heap_tuned();
  g_world = &process.world();
  return run_tests_on_every_rank(&argc, argv, g_world->rank());
}
