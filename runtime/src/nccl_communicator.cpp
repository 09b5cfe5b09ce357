// The NCCL backend; see axonn/runtime/nccl_communicator.hpp. Compiled only when
// AXONN_HAVE_NCCL (CMake found NCCL and the CUDA runtime under /usr/local/cuda).
#include "axonn/runtime/nccl_communicator.hpp"

#if AXONN_HAVE_NCCL

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

void check_result(ncclResult_t code, const char* call, const char* file, int line) {
  if (code != ncclSuccess) check_failed(call, ncclGetErrorString(code), file, line);
}

void check_result(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) check_failed(call, cudaGetErrorString(code), file, line);
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

namespace {

ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kByte: return ncclUint8;
    default:
      throw InternalError("comm", std::string("unsupported tensor type ") + at::toString(t.scalar_type()), rank_and_host(),
                  "a floating-point or integer tensor for the NCCL backend");
  }
}

// Uneven chunks, one NCCL call per member's non-empty chunk inside one group:
// call(member, offset, elements). Returns the chunks' total, elements.
template <class Call>
int64_t grouped_chunks(const std::vector<int64_t>& counts, Call call) {
  AXONN_CHECK(ncclGroupStart());
  int64_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) call(static_cast<int>(r), offset, static_cast<size_t>(counts[r]));
    offset += counts[r];
  }
  AXONN_CHECK(ncclGroupEnd());
  return offset;
}

void* device_pointer(const at::Tensor& t, const char* what) {
  cudaPointerAttributes attr{};
  if (!t.is_contiguous() || cudaPointerGetAttributes(&attr, t.data_ptr()) != cudaSuccess ||
      attr.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    throw InternalError("comm", std::string(what) + " is not a contiguous tensor in device memory", rank_and_host(),
                "device memory for the NCCL backend");
  }
  return t.data_ptr();
}

// Completion of the operations enqueued so far on a stream; keeps their tensors alive.
class NcclWork final : public Work {
 public:
  NcclWork(cudaStream_t stream, std::initializer_list<at::Tensor> keep) : keep_(keep) {
    AXONN_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    AXONN_CHECK(cudaEventRecord(event_, stream));
  }
  ~NcclWork() override {
    if (event_) {
      cudaEventSynchronize(event_);  // the buffers must outlive the operation
      cudaEventDestroy(event_);
    }
  }
  void wait() override { AXONN_CHECK(cudaEventSynchronize(event_)); }
  bool test() override {
    cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    AXONN_CHECK(rc);
    return true;
  }

 private:
  std::vector<at::Tensor> keep_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace

std::optional<NcclDeviceProblem> nccl_device_problem(MpiCommunicator& group, int local_rank) {
  const int devices = cuda_device_count();
  MPI_Comm host_comm = MPI_COMM_NULL;
  AXONN_CHECK(MPI_Comm_split_type(group.handle(), MPI_COMM_TYPE_SHARED, group.rank(), MPI_INFO_NULL, &host_comm));
  const MpiCommunicator host(host_comm, /*owned=*/true, group.name() + ".host");
  // The physical device this rank would use, by PCI bus id (all zero without one): ranks
  // pinned to a GPU each by CUDA_VISIBLE_DEVICES all see a device 0, yet differ here.
  constexpr int kBusIdBytes = 32;
  std::array<char, kBusIdBytes> mine{};
  const int device = devices > 0 ? local_rank % devices : -1;
  if (device >= 0 && cudaDeviceGetPCIBusId(mine.data(), kBusIdBytes - 1, device) != cudaSuccess) {
    (void)cudaGetLastError();
    throw CommError("comm", fmt::format("cannot read the PCI bus id of CUDA device {}", device), rank_and_host(),
                    "a working CUDA device");
  }
  std::vector<char> all(static_cast<size_t>(kBusIdBytes) * static_cast<size_t>(host.size()));
  AXONN_CHECK(MPI_Allgather(mine.data(), kBusIdBytes, MPI_CHAR, all.data(), kBusIdBytes, MPI_CHAR, host.handle()));
  int sharing = 0;
  for (int r = 0; r < host.size(); ++r)
    if (device >= 0 && r != host.rank() &&
        std::memcmp(all.data() + static_cast<size_t>(r) * kBusIdBytes, mine.data(), kBusIdBytes) == 0)
      ++sharing;
  // 0: fine; 1: another rank on this host would use this rank's device; 2: no device.
  int problem = device < 0 ? 2 : (sharing > 0 ? 1 : 0), worst = 0;
  AXONN_CHECK(MPI_Allreduce(&problem, &worst, 1, MPI_INT, MPI_MAX, group.handle()));
  if (worst == 0) return std::nullopt;
  if (worst == 2)
    return NcclDeviceProblem{device < 0 ? "no CUDA device on this rank" : "a rank of the group has no CUDA device",
                             "one GPU per rank for the NCCL backend (use the MPI backend on CPU)"};
  return NcclDeviceProblem{
      problem == 1 ? fmt::format("{} other rank(s) of '{}' on this host would use this rank's CUDA device {} (PCI {})",
                                 sharing, group.name(), device, mine.data())
                   : "ranks of the group on one host would share a CUDA device",
      "one GPU per rank for the NCCL backend: fewer ranks per host, or local ranks that pick distinct devices"};
}

NcclCommunicator::NcclCommunicator(MpiCommunicator& bootstrap, int local_rank) : name_(bootstrap.name() + ".nccl") {
  // Agree on whether every rank has a GPU of its own before any rank waits in an NCCL
  // call: NCCL refuses two ranks of one communicator on one device, and a rank that
  // threw alone would leave the others waiting in ncclCommInitRank.
  if (const auto problem = nccl_device_problem(bootstrap, local_rank))
    throw CommError("comm", problem->what, rank_and_host(), problem->expected);
  const int devices = cuda_device_count();
  device_ = local_rank % devices;
  AXONN_CHECK(cudaSetDevice(device_));
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) AXONN_CHECK(ncclGetUniqueId(&id));
  AXONN_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap.handle()));
  AXONN_CHECK(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()));
  AXONN_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  AXONN_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  rank_ = bootstrap.rank();
  size_ = bootstrap.size();
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, std::string name)
    : comm_(comm), device_(device), name_(std::move(name)) {
  AXONN_CHECK(cudaSetDevice(device_));
  AXONN_CHECK(ncclCommUserRank(comm_, &rank_));
  AXONN_CHECK(ncclCommCount(comm_, &size_));
  AXONN_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  AXONN_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
  if (ready_) cudaEventDestroy(ready_);
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (comm_) ncclCommDestroy(comm_);
}

void NcclCommunicator::after_default_stream() {
  // The data was produced by work on the legacy default stream: order the collective after it.
  AXONN_CHECK(cudaEventRecord(ready_, cudaStreamLegacy));
  AXONN_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
}

WorkHandle NcclCommunicator::record(std::initializer_list<at::Tensor> keep) {
  return std::make_unique<NcclWork>(stream_, keep);
}

WorkHandle NcclCommunicator::all_reduce(at::Tensor t, ReduceOp op) {
  void* p = device_pointer(t, "all_reduce");
  after_default_stream();
  AXONN_CHECK(ncclAllReduce(p, p, static_cast<size_t>(t.numel()), nccl_type(t), op == ReduceOp::Sum ? ncclSum : ncclMax,
                            comm_, stream_));
  return record({t});
}

WorkHandle NcclCommunicator::all_gather(at::Tensor in, at::Tensor out) {
  AXONN_ASSERT(out.numel() == in.numel() * size_);
  after_default_stream();
  AXONN_CHECK(ncclAllGather(device_pointer(in, "all_gather input"), device_pointer(out, "all_gather output"),
                            static_cast<size_t>(in.numel()), nccl_type(in), comm_, stream_));
  return record({in, out});
}

WorkHandle NcclCommunicator::reduce_scatter(at::Tensor in, at::Tensor out) {
  AXONN_ASSERT(in.numel() == out.numel() * size_);
  after_default_stream();
  AXONN_CHECK(ncclReduceScatter(device_pointer(in, "reduce_scatter input"), device_pointer(out, "reduce_scatter output"),
                                static_cast<size_t>(out.numel()), nccl_type(in), ncclSum, comm_, stream_));
  return record({in, out});
}

WorkHandle NcclCommunicator::reduce_scatter_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) {
  AXONN_ASSERT(static_cast<int>(counts.size()) == size_ && out.numel() == counts[static_cast<size_t>(rank_)]);
  after_default_stream();
  // NCCL has no uneven reduce-scatter: one reduce per member's chunk, to that member.
  const size_t element = in.element_size();
  auto* base = static_cast<char*>(device_pointer(in, "reduce_scatter_v input"));
  void* mine = out.numel() > 0 ? device_pointer(out, "reduce_scatter_v output") : nullptr;
  const int64_t total = grouped_chunks(counts, [&](int r, int64_t offset, size_t n) {
    AXONN_CHECK(ncclReduce(base + offset * element, r == rank_ ? mine : nullptr, n, nccl_type(in), ncclSum, r, comm_,
                           stream_));
  });
  AXONN_ASSERT(total == in.numel());
  return record({in, out});
}

WorkHandle NcclCommunicator::all_gather_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) {
  AXONN_ASSERT(static_cast<int>(counts.size()) == size_ && in.numel() == counts[static_cast<size_t>(rank_)]);
  after_default_stream();
  // NCCL has no uneven all-gather: one broadcast per member's chunk, from that member.
  const size_t element = out.element_size();
  auto* base = static_cast<char*>(device_pointer(out, "all_gather_v output"));
  const void* mine = in.numel() > 0 ? device_pointer(in, "all_gather_v input") : nullptr;
  const int64_t total = grouped_chunks(counts, [&](int r, int64_t offset, size_t n) {
    AXONN_CHECK(ncclBroadcast(r == rank_ ? mine : nullptr, base + offset * element, n, nccl_type(out), r, comm_, stream_));
  });
  AXONN_ASSERT(total == out.numel());
  return record({in, out});
}

WorkHandle NcclCommunicator::broadcast(at::Tensor t, int root) {
  void* p = device_pointer(t, "broadcast");
  after_default_stream();
  AXONN_CHECK(ncclBroadcast(p, p, static_cast<size_t>(t.numel()), nccl_type(t), root, comm_, stream_));
  return record({t});
}

WorkHandle NcclCommunicator::reduce(at::Tensor t, int root) {
  void* p = device_pointer(t, "reduce");
  after_default_stream();
  AXONN_CHECK(ncclReduce(p, p, static_cast<size_t>(t.numel()), nccl_type(t), ncclSum, root, comm_, stream_));
  return record({t});
}

WorkHandle NcclCommunicator::send(at::Tensor t, int peer, int /*tag: NCCL orders messages per peer*/) {
  after_default_stream();
  AXONN_CHECK(ncclSend(device_pointer(t, "send"), static_cast<size_t>(t.numel()), nccl_type(t), peer, comm_, stream_));
  return record({t});
}

WorkHandle NcclCommunicator::recv(at::Tensor t, int peer, int /*tag*/) {
  after_default_stream();
  AXONN_CHECK(ncclRecv(device_pointer(t, "recv"), static_cast<size_t>(t.numel()), nccl_type(t), peer, comm_, stream_));
  return record({t});
}

void NcclCommunicator::barrier() {
  void* flag = nullptr;
  AXONN_CHECK(cudaMalloc(&flag, sizeof(float)));
  ncclResult_t rc = ncclAllReduce(flag, flag, 1, ncclFloat32, ncclSum, comm_, stream_);
  cudaError_t sync = cudaStreamSynchronize(stream_);
  cudaFree(flag);
  AXONN_CHECK(rc);
  AXONN_CHECK(sync);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, const std::string& name) {
  ncclComm_t sub = nullptr;
  AXONN_CHECK(ncclCommSplit(comm_, color, key, &sub, nullptr));
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub, device_, name));
}

}  // namespace axonn::runtime

#endif  // AXONN_HAVE_NCCL
