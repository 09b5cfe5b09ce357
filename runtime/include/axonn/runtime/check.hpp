// The one checking macro every MPI, NCCL and CUDA call goes through.
//
//   AXONN_CHECK(MPI_Barrier(comm));            // int (MPI)
//   AXONN_CHECK(ncclAllReduce(...));           // ncclResult_t   (nccl_communicator.cpp)
//   AXONN_CHECK(cudaStreamCreate(&s));         // cudaError_t    (nccl_communicator.cpp)
//
// On failure it throws axonn::Error "[comm] <call> failed: <the library's reason>:
// rank R on host H (file:line); expected success". The result type picks the
// overload of check_result that knows how to turn the code into words. The MPI part
// is its own target (axonn_mpi_check: MPI, no LibTorch), so MPI tools use it too; an
// MPI call's code reaches it only where the communicator returns errors
// (MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), as MpiEnvironment sets).
#pragma once

#include <string>

namespace axonn::runtime {

// "rank 3 on host n1" for messages; works before and after MPI_Init.
std::string rank_and_host();

[[noreturn]] void check_failed(const std::string& call, const std::string& reason, const char* file, int line);

void check_result(int mpi_code, const char* call, const char* file, int line);

}  // namespace axonn::runtime

#define AXONN_CHECK(call) ::axonn::runtime::check_result((call), #call, __FILE__, __LINE__)
