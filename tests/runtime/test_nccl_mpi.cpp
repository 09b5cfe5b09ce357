// The NCCL backend against the MPI backend, under real mpirun (tests/CMakeLists.txt runs
// it on 2 ranks). Every collective of runtime::Communicator runs on both backends with
// the same inputs, and the NCCL results (device memory, copied back) must equal the MPI
// ones exactly: the inputs are small integers, exact in every summation order.
//
// On a machine without a GPU (CI) only the refusal runs: every rank throws CommError
// with a message, none waits. With one GPU per rank the comparisons run;
// tools/gpu_nccl_check.sh builds this binary against a CUDA LibTorch and runs it on a
// lent GPU machine. Where two ranks of a host would use one device, every rank refuses
// (NCCL cannot put two ranks of one communicator on one device).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/features.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/nccl_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "mpi_test_main.hpp"

using namespace axonn;

namespace {
runtime::MpiCommunicator* g_world = nullptr;
}

#if AXONN_HAVE_NCCL
namespace {

// A device copy of a host tensor, seen through at::from_blob: the same on a CPU LibTorch
// (CI's) and a CUDA one. The memory is cudaMalloc'd and freed here.
class DeviceCopy {
 public:
  explicit DeviceCopy(const at::Tensor& host)
      : sizes_(host.sizes().vec()), type_(host.scalar_type()), bytes_(host.nbytes()) {
    AXONN_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes_, 1)));
    const at::Tensor c = host.contiguous();
    if (bytes_ > 0) AXONN_CHECK(cudaMemcpy(ptr_, c.data_ptr(), bytes_, cudaMemcpyHostToDevice));
  }
  ~DeviceCopy() { cudaFree(ptr_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  at::Tensor tensor() const { return at::from_blob(ptr_, sizes_, at::TensorOptions().dtype(type_)); }
  at::Tensor host() const {
    at::Tensor h = at::empty(sizes_, at::TensorOptions().dtype(type_));
    if (bytes_ > 0) AXONN_CHECK(cudaMemcpy(h.data_ptr(), ptr_, bytes_, cudaMemcpyDeviceToHost));
    return h;
  }
  void* data() const { return ptr_; }

 private:
  std::vector<int64_t> sizes_;
  at::ScalarType type_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

// Small integers that differ per rank and per element: exact sums in every order.
at::Tensor input(int rank, int64_t n, at::ScalarType type) {
  return at::remainder(at::arange(n, at::kLong) * 3 + rank * 5 + 1, 16).to(type);
}

// Collective: whether every rank has a GPU of its own (runtime::nccl_device_problem, the
// constructor's check); else why not.
bool gpus_for_every_rank(std::string* why) {
  const auto problem = runtime::nccl_device_problem(*g_world, g_world->rank());
  if (problem) *why = problem->what + ": the refusal is Nccl.RefusesWithoutAGpuForEveryRank";
  return !problem;
}

}  // namespace

// Without a GPU per rank, every rank throws CommError naming what is missing; none hangs
// in NCCL's initialisation.
TEST(Nccl, RefusesWithoutAGpuForEveryRank) {
  std::string why;
  if (gpus_for_every_rank(&why)) GTEST_SKIP() << "every rank has a GPU of its own: nothing to refuse";
  try {
    runtime::NcclCommunicator nccl(*g_world, g_world->rank());
    ADD_FAILURE() << "expected CommError: " << why;
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("CUDA device") != std::string::npos) << what;
    EXPECT_NE(what.find("[comm]"), std::string::npos) << what;
  }
}

TEST(Nccl, EveryCollectiveEqualsTheMpiBackend) {
  std::string why;
  if (!gpus_for_every_rank(&why)) GTEST_SKIP() << why;
  runtime::MpiCommunicator& mpi = *g_world;
  runtime::NcclCommunicator nccl(mpi, mpi.rank());
  const int r = mpi.rank(), p = mpi.size();
  EXPECT_EQ(nccl.rank(), r);  // EXPECT: every rank goes on to every collective
  EXPECT_EQ(nccl.size(), p);
  const int64_t n = 6;

  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kBFloat16, at::kLong, at::kInt}) {
    SCOPED_TRACE(at::toString(type));
    at::Tensor want = input(r, n, type);
    DeviceCopy got(want);
    mpi.all_reduce(want, runtime::ReduceOp::Sum)->wait();
    nccl.all_reduce(got.tensor(), runtime::ReduceOp::Sum)->wait();
    EXPECT_TRUE(got.host().equal(want)) << got.host() << want;
  }
  {
    SCOPED_TRACE("all_reduce max");
    at::Tensor want = input(r, n, at::kFloat);
    DeviceCopy got(want);
    mpi.all_reduce(want, runtime::ReduceOp::Max)->wait();
    nccl.all_reduce(got.tensor(), runtime::ReduceOp::Max)->wait();
    EXPECT_TRUE(got.host().equal(want));
  }
  {
    SCOPED_TRACE("all_gather, out of place and in place");
    const at::Tensor mine = input(r, n, at::kFloat);
    at::Tensor want = at::zeros({p * n});
    mpi.all_gather(mine, want)->wait();
    DeviceCopy in(mine), out(at::zeros({p * n}));
    nccl.all_gather(in.tensor(), out.tensor())->wait();
    EXPECT_TRUE(out.host().equal(want));
    at::Tensor staged = at::zeros({p * n});
    staged.narrow(0, r * n, n).copy_(mine);
    DeviceCopy whole(staged);
    const at::Tensor w = whole.tensor();
    nccl.all_gather(w.narrow(0, r * n, n), w)->wait();
    EXPECT_TRUE(whole.host().equal(want));
  }
  {
    SCOPED_TRACE("reduce_scatter");
    const at::Tensor full = input(r, p * n, at::kFloat);
    at::Tensor want = at::zeros({n});
    mpi.reduce_scatter(full, want)->wait();
    DeviceCopy in(full), out(at::zeros({n}));
    nccl.reduce_scatter(in.tensor(), out.tensor())->wait();
    EXPECT_TRUE(out.host().equal(want));
  }
  // Uneven chunks, one of them empty where there are two members or more.
  std::vector<int64_t> counts;
  for (int i = 0; i < p; ++i) counts.push_back(i == 1 ? 0 : 2 + i);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  {
    SCOPED_TRACE("reduce_scatter_v");
    const at::Tensor full = input(r, total, at::kFloat);
    at::Tensor want = at::zeros({counts[static_cast<size_t>(r)]});
    mpi.reduce_scatter_v(full, counts, want)->wait();
    DeviceCopy in(full), out(at::zeros({counts[static_cast<size_t>(r)]}));
    nccl.reduce_scatter_v(in.tensor(), counts, out.tensor())->wait();
    EXPECT_TRUE(out.host().equal(want));
  }
  {
    SCOPED_TRACE("all_gather_v");
    const at::Tensor mine = input(r, counts[static_cast<size_t>(r)], at::kFloat);
    at::Tensor want = at::zeros({total});
    mpi.all_gather_v(mine, counts, want)->wait();
    DeviceCopy in(mine), out(at::zeros({total}));
    nccl.all_gather_v(in.tensor(), counts, out.tensor())->wait();
    EXPECT_TRUE(out.host().equal(want));
  }
  const int root = p - 1;
  {
    SCOPED_TRACE("broadcast");
    at::Tensor want = input(r, n, at::kFloat);
    DeviceCopy got(want);
    mpi.broadcast(want, root)->wait();
    nccl.broadcast(got.tensor(), root)->wait();
    EXPECT_TRUE(got.host().equal(want));
  }
  {
    SCOPED_TRACE("reduce");
    at::Tensor want = input(r, n, at::kFloat);
    DeviceCopy got(want);
    mpi.reduce(want, root)->wait();
    nccl.reduce(got.tensor(), root)->wait();
    if (r == root) {
      EXPECT_TRUE(got.host().equal(want));
    }
  }
  if (p >= 2) {
    SCOPED_TRACE("send and recv, rank 0 to 1 (a pipeline's one direction)");
    if (r == 0) {
      DeviceCopy out(input(0, n, at::kFloat));
      nccl.send(out.tensor(), 1, 7)->wait();
    } else if (r == 1) {
      DeviceCopy in(at::zeros({n}));
      nccl.recv(in.tensor(), 0, 7)->wait();
      EXPECT_TRUE(in.host().equal(input(0, n, at::kFloat)));
    }
  }
  {
    SCOPED_TRACE("split: odd and even ranks, in reverse order");
    auto mpi_sub = mpi.split(r % 2, -r, "parity");
    auto nccl_sub = nccl.split(r % 2, -r, "parity");
    EXPECT_EQ(nccl_sub->rank(), mpi_sub->rank());
    EXPECT_EQ(nccl_sub->size(), mpi_sub->size());
    EXPECT_EQ(nccl_sub->name(), "parity");
    at::Tensor want = input(r, n, at::kFloat);
    DeviceCopy got(want);
    mpi_sub->all_reduce(want, runtime::ReduceOp::Sum)->wait();
    nccl_sub->all_reduce(got.tensor(), runtime::ReduceOp::Sum)->wait();
    EXPECT_TRUE(got.host().equal(want));
  }
  nccl.barrier();
  {
    SCOPED_TRACE("Work::test polls to completion");
    at::Tensor want = input(r, 1 << 16, at::kFloat);
    DeviceCopy got(want);
    mpi.all_reduce(want, runtime::ReduceOp::Sum)->wait();
    runtime::WorkHandle h = nccl.all_reduce(got.tensor(), runtime::ReduceOp::Sum);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool done = false;
    while (!(done = h->test()) && std::chrono::steady_clock::now() < deadline) {
    }
    EXPECT_TRUE(done);
    EXPECT_TRUE(got.host().equal(want));
  }
}

// A collective is ordered after the work already queued on the legacy default stream,
// where LibTorch's CUDA kernels run: a chain of memsets there, then at once an
// out-of-place all-gather on the communicator's own stream, must copy the last memset's
// bytes. Large enough (256 MiB) that a collective not waiting would read a half-set buffer.
TEST(Nccl, WaitsForTheDefaultStreamsWork) {
  std::string why;
  if (!gpus_for_every_rank(&why)) GTEST_SKIP() << why;
  runtime::NcclCommunicator nccl(*g_world, g_world->rank());
  const int64_t n = int64_t{64} << 20, p = g_world->size();
  DeviceCopy src(at::zeros({n})), dst(at::zeros({p * n}));
  AXONN_CHECK(cudaDeviceSynchronize());
  for (int byte : {0x00, 0x11, 0x22, 0x3f})
    AXONN_CHECK(cudaMemsetAsync(src.data(), byte, n * sizeof(float), cudaStreamLegacy));
  nccl.all_gather(src.tensor(), dst.tensor())->wait();
  const at::Tensor back = dst.host().view(at::kInt);
  const int64_t wrong = back.ne(0x3f3f3f3f).sum().item<int64_t>();
  EXPECT_EQ(wrong, 0) << "elements of the gather that missed the last memset, of " << p * n;
}

// A host tensor is refused with a message, on every rank alike (the check runs before
// any NCCL call, so no rank waits).
TEST(Nccl, RefusesHostMemory) {
  std::string why;
  if (!gpus_for_every_rank(&why)) GTEST_SKIP() << why;
  runtime::NcclCommunicator nccl(*g_world, g_world->rank());
  try {
    nccl.all_reduce(at::ones({4}), runtime::ReduceOp::Sum);
    ADD_FAILURE() << "expected an error for a host tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device memory"), std::string::npos) << e.what();
  }
}

#else
TEST(Nccl, NotBuilt) { GTEST_SKIP() << "NCCL was not found under /usr/local/cuda when this was built"; }
#endif

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::set_compute_threads(1);
  g_world = &process.world();
  return test::run_tests_on_every_rank(&argc, argv, g_world->rank());
}
