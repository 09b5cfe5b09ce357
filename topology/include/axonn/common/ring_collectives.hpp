// The performance model is of ring collectives (docs/model.md section 1). Open MPI picks
// its algorithms by message size and process count, and for an in-place non-blocking
// all-reduce (what the runtime issues) its libnbc component defaults to a binomial
// tree, which moves log2(p) times the data of a ring over the slowest link. This asks
// Open MPI for ring algorithms wherever it offers one, through MCA environment
// variables read by MPI_Init; a value the user has set already wins.
//
// Call before MPI_Init. Used by the runtime (non-blocking collectives, libnbc), so by
// `axplan calibrate`, which times the runtime's collectives, and by
// bench_collective_algorithms, which compares them with the blocking ones (tuned).
#pragma once

#include <cstdlib>

namespace axonn {

inline void prefer_ring_collectives() {
  // blocking (coll/tuned): 4 = ring all-reduce, 4 = ring all-gather, 3 = ring reduce-scatter
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 0);
  setenv("OMPI_MCA_coll_tuned_allgather_algorithm", "4", 0);
  setenv("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "3", 0);
  // non-blocking (coll/libnbc): 1 = ring all-reduce. Its all-gather has no ring (linear
  // or recursive doubling) and its reduce-scatter no choice (a binomial reduce, then a
  // scatter), so the runtime runs both as rings of its own (runtime/mpi_ring.hpp).
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
}

}  // namespace axonn
