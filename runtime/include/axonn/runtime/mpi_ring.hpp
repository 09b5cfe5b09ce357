// Ring all-gather and ring reduce-scatter on MPI point-to-point messages, the
// algorithms of the performance model (docs/model.md section 1) and of NCCL, for the
// MPI backend's non-blocking all_gather and reduce_scatter (mpi_communicator.hpp).
//
// Why not MPI_Iallgather / MPI_Ireduce_scatter: Open MPI 4.1 runs them in coll/libnbc,
// which has no ring for either (a linear all-gather; a binomial reduce of the whole
// buffer to one member, then a scatter). Across nodes they put up to 2.3x (all-gather)
// and 3.2x (reduce-scatter) a ring's bytes on a node's link (docs/validation.md, "The
// non-blocking all-gather").
//
// The ring over p members, member r sending to r+1 and receiving from r-1 (mod p), in
// p-1 steps of one chunk each (chunk i has counts[i] elements, laid out in order):
//   all-gather      step s: send chunk r-s, receive chunk r-s-1 into the output.
//   reduce-scatter  step s: send the partial sum of chunk r-s-1 (step 0: this
//                   member's own contribution to it), receive the left's partial sum
//                   of chunk r-s-2 and add this member's to it (MPI_Reduce_local). After
//                   step p-2 the sum of chunk r is complete: each element's sum runs
//                   from member i+1 round to member i, the same order on every run.
// Each step's messages carry the ring's tag; concurrent rings on one communicator need
// different tags (MPI matches messages by source, tag and order).
//
// Non-blocking: advance() posts the next step whenever the current one has completed,
// and returns true once the last has. Between calls nothing but the posted messages
// moves, so every member must keep advancing its rings while it waits for anything
// (the MPI backend's waits do, and so does its progress thread). Not thread-safe: one
// caller at a time.
//
// Example (4 members, 2 floats each):
//   MpiRing ring(MpiRing::Kind::AllGather, mine, all, {2, 2, 2, 2}, MPI_FLOAT, MPI_SUM, comm, 17);
//   while (!ring.advance()) {}   // all = the members' 8 floats in rank order
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace axonn::runtime {

class MpiRing {
 public:
  enum class Kind { AllGather, ReduceScatter };

  // AllGather: `in` holds counts[rank] elements (or is `out` + its displacement: in
  //   place), `out` all of them. ReduceScatter: `in` holds all, `out` counts[rank]
  //   elements, the sum over members with `op`. Buffers live until the ring completes.
  // Posts the first step.
  MpiRing(Kind kind, const void* in, void* out, std::vector<int> counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
          int tag);
  ~MpiRing();  // completes the posted step first (abandon() to leave it)
  MpiRing(const MpiRing&) = delete;
  MpiRing& operator=(const MpiRing&) = delete;

  bool advance();                  // true once complete; throws CommError on an MPI failure
  bool done() const { return step_ >= last_step_; }
  // Forgets the posted messages without completing them (the job is ending; MPI may
  // still write the buffers, which the caller keeps alive).
  void abandon();

 private:
  void post();                     // the messages of step_
  char* chunk(char* base, int i) const { return base + displacement_[static_cast<size_t>(i)] * element_bytes_; }
  int member(int offset) const { return ((rank_ + offset) % size_ + size_) % size_; }

  Kind kind_;
  const char* in_;
  char* out_;
  std::vector<int> counts_;
  std::vector<int64_t> displacement_;  // elements
  MPI_Datatype type_;
  MPI_Op op_;
  MPI_Comm comm_;
  int tag_, rank_ = 0, size_ = 1;
  int64_t element_bytes_ = 0;
  int step_ = 0, last_step_ = 0;       // steps 0 .. size-2; done at size-1
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
  // Reduce-scatter: the partial sum being sent and the one being received, swapped
  // after each step (each the largest chunk's size).
  std::vector<std::byte> sending_, receiving_;
  const char* send_from_ = nullptr;
};

}  // namespace axonn::runtime
