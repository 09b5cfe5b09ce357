// Ring collectives on MPI point-to-point messages; see axonn/runtime/mpi_ring.hpp.
#include "axonn/runtime/mpi_ring.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "axonn/common/error.hpp"
#include "axonn/runtime/check.hpp"

namespace axonn::runtime {

MpiRing::MpiRing(Kind kind, const void* in, void* out, std::vector<int> counts, MPI_Datatype type, MPI_Op op,
                 MPI_Comm comm, int tag)
    : kind_(kind),
      in_(static_cast<const char*>(in)),
      out_(static_cast<char*>(out)),
      counts_(std::move(counts)),
      type_(type),
      op_(op),
      comm_(comm),
      tag_(tag) {
  AXONN_CHECK(MPI_Comm_rank(comm_, &rank_));
  AXONN_CHECK(MPI_Comm_size(comm_, &size_));
  AXONN_ASSERT(static_cast<int>(counts_.size()) == size_);
  int bytes = 0;
  AXONN_CHECK(MPI_Type_size(type_, &bytes));
  element_bytes_ = bytes;
  int64_t total = 0;
  for (int c : counts_) {
    AXONN_ASSERT(c >= 0);
    displacement_.push_back(total);
    total += c;
  }
  last_step_ = size_ - 1;
  const int64_t mine = counts_[static_cast<size_t>(rank_)] * element_bytes_;
  if (kind_ == Kind::AllGather) {
    char* slot = chunk(out_, rank_);
    if (in_ != slot && mine > 0) std::memcpy(slot, in_, static_cast<size_t>(mine));
  } else if (size_ == 1) {
    if (mine > 0) std::memcpy(out_, in_, static_cast<size_t>(mine));
  } else {
    const int64_t largest = *std::max_element(counts_.begin(), counts_.end()) * element_bytes_;
    sending_.resize(static_cast<size_t>(largest));
    receiving_.resize(static_cast<size_t>(largest));
  }
  if (!done()) post();
}

MpiRing::~MpiRing() {
  if (requests_[0] != MPI_REQUEST_NULL || requests_[1] != MPI_REQUEST_NULL)
    MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE);  // no throwing from a destructor
}

void MpiRing::post() {
  const int right = member(1), left = member(-1);
  const bool reduce = kind_ == Kind::ReduceScatter;
  const int sent = reduce ? member(-step_ - 1) : member(-step_);
  const int received = reduce ? member(-step_ - 2) : member(-step_ - 1);
  const char* send_buffer = nullptr;
  char* receive_buffer = nullptr;
  if (!reduce) {
    send_buffer = chunk(out_, sent);
    receive_buffer = chunk(out_, received);
  } else {
    send_buffer = step_ == 0 ? in_ + displacement_[static_cast<size_t>(sent)] * element_bytes_
                             : reinterpret_cast<const char*>(sending_.data());
    // The last step's partial sum is of this member's own chunk: straight into `out`.
    receive_buffer = step_ == last_step_ - 1 ? out_ : reinterpret_cast<char*>(receiving_.data());
  }
  AXONN_CHECK(MPI_Irecv(receive_buffer, counts_[static_cast<size_t>(received)], type_, left, tag_, comm_,
                        &requests_[1]));
  AXONN_CHECK(MPI_Isend(send_buffer, counts_[static_cast<size_t>(sent)], type_, right, tag_, comm_, &requests_[0]));
}

bool MpiRing::advance() {
  while (!done()) {
    int complete = 0;
    AXONN_CHECK(MPI_Testall(2, requests_, &complete, MPI_STATUSES_IGNORE));
    if (!complete) return false;
    if (kind_ == Kind::ReduceScatter) {  // add this member's chunk to the partial sum received
      const int received = member(-step_ - 2);
      const bool last = step_ == last_step_ - 1;
      void* partial = last ? static_cast<void*>(out_) : static_cast<void*>(receiving_.data());
      AXONN_CHECK(MPI_Reduce_local(in_ + displacement_[static_cast<size_t>(received)] * element_bytes_, partial,
                                   counts_[static_cast<size_t>(received)], type_, op_));
      if (!last) std::swap(sending_, receiving_);  // the next step sends it
    }
    ++step_;
    if (!done()) post();
  }
  return true;
}

void MpiRing::abandon() {
  requests_[0] = requests_[1] = MPI_REQUEST_NULL;
  step_ = last_step_;
}

}  // namespace axonn::runtime
