// What every MPI program of the runtime (axrun, calibrate, the benches, the MPI tests)
// does first, in this order: tune the host heap before any tensor exists
// (host_malloc.hpp), start MPI, and take the world communicator. Lives as long as main.
//
// Example:
//   runtime::RankProcess process(&argc, &argv);
//   runtime::MpiCommunicator& world = process.world();
#pragma once

#include <memory>

#include "axonn/runtime/host_malloc.hpp"
#include "axonn/runtime/mpi_communicator.hpp"

namespace axonn::runtime {

class RankProcess {
 public:
  RankProcess(int* argc, char*** argv)
      : heap_tuned_(tune_host_malloc()), env_(argc, argv), world_(MpiCommunicator::world()) {}

  MpiCommunicator& world() { return *world_; }
  bool heap_tuned() const { return heap_tuned_; }  // false: glibc's defaults kept (see tune_host_malloc)

 private:
  bool heap_tuned_;  // members initialise in this order
  MpiEnvironment env_;
  std::unique_ptr<MpiCommunicator> world_;
};

}  // namespace axonn::runtime
