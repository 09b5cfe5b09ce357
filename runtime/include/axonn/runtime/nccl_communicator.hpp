// The NCCL backend of Communicator, built only when NCCL is found (AXONN_HAVE_NCCL).
// Tensors passed to it must live in device memory of this rank's GPU (their data_ptr()
// is used as a raw device pointer); collectives run on the communicator's own CUDA
// stream, ordered after the work already queued on the legacy default stream (which
// produced the data), and a Work waits for an event recorded after the operation.
//
// Example:
//   NcclCommunicator nccl(*mpi_world, local_rank);   // collective over the MPI communicator
//   nccl.all_reduce(device_tensor)->wait();
#pragma once

#include "axonn/runtime/features.hpp"

#if AXONN_HAVE_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <optional>
#include <string>

#include "axonn/runtime/check.hpp"
#include "axonn/runtime/mpi_communicator.hpp"

namespace axonn::runtime {

void check_result(ncclResult_t code, const char* call, const char* file, int line);
void check_result(cudaError_t code, const char* call, const char* file, int line);

// Number of CUDA devices visible to this process (0 when there is no driver or GPU).
int cuda_device_count();

// Why `group` cannot have an NCCL communicator, or nothing. Collective over `group`,
// and every rank gets an answer (its own message where the problem is its own): a rank
// without a CUDA device, or two ranks of one host that would use the same physical
// device (local_rank % device count, compared by PCI bus id, so ranks pinned to a GPU
// each by CUDA_VISIBLE_DEVICES pass).
struct NcclDeviceProblem {
  std::string what, expected;
};
std::optional<NcclDeviceProblem> nccl_device_problem(MpiCommunicator& group, int local_rank);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`: its rank 0 creates the NCCL id and broadcasts it over
  // MPI. Uses device local_rank % device count. Every rank throws CommError when
  // nccl_device_problem finds one (NCCL needs a device per rank).
  NcclCommunicator(MpiCommunicator& bootstrap, int local_rank);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  WorkHandle all_reduce(at::Tensor t, ReduceOp op) override;
  WorkHandle all_gather(at::Tensor in, at::Tensor out) override;
  WorkHandle reduce_scatter(at::Tensor in, at::Tensor out) override;
  WorkHandle reduce_scatter_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) override;
  WorkHandle all_gather_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) override;
  WorkHandle broadcast(at::Tensor t, int root) override;
  WorkHandle reduce(at::Tensor t, int root) override;
  WorkHandle send(at::Tensor t, int peer, int tag) override;
  WorkHandle recv(at::Tensor t, int peer, int tag) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;

 private:
  NcclCommunicator(ncclComm_t comm, int device, std::string name);  // adopts a split
  WorkHandle record(std::initializer_list<at::Tensor> keep);
  void after_default_stream();
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  int device_ = 0, rank_ = 0, size_ = 1;
  std::string name_;
};

}  // namespace axonn::runtime

#endif  // AXONN_HAVE_NCCL
