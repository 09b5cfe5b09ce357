// MPI's side of the checking macro and of ending a job; see axonn/runtime/check.hpp and
// axonn/runtime/abort_job.hpp.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "axonn/common/error.hpp"
#include "axonn/runtime/abort_job.hpp"
#include "axonn/runtime/check.hpp"

namespace axonn::runtime {

std::string rank_and_host() {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return "rank " + std::to_string(rank) + " on host " + host;
}

void check_failed(const std::string& call, const std::string& reason, const char* file, int line) {
  throw CommError("comm", call + " failed: " + reason, rank_and_host() + " (" + file + ":" + std::to_string(line) + ")",
                  "success");
}

void check_result(int mpi_code, const char* call, const char* file, int line) {
  if (mpi_code == MPI_SUCCESS) return;
  char reason[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(mpi_code, reason, &len);
  check_failed(call, reason, file, line);
}

void abort_job(const std::string& message, int exit_code) {
  std::fprintf(stderr, "axonn: %s: %s\n", rank_and_host().c_str(), message.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace axonn::runtime
