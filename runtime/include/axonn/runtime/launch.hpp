// Which launcher started this process, read from its environment variables.
//
// Open MPI (mpirun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
// Slurm (srun):      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// PMI (MPICH/Hydra): PMI_RANK, PMI_SIZE
// Nothing:           a single process (rank 0 of 1).
//
// Example:
//   LaunchInfo l = detect_launch(std::getenv);
//   l.launcher;   // "openmpi", "slurm", "pmi" or "none"
#pragma once

#include <functional>
#include <string>

namespace axonn::runtime {

struct LaunchInfo {
  std::string launcher = "none";
  int rank = 0;
  int size = 1;
  int local_rank = 0;
};

// `getenv` returns nullptr for unset variables (std::getenv, or a fake in tests).
// Throws axonn::Error when a variable is set but not a number.
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv);

}  // namespace axonn::runtime
