// The main() of an MPI GoogleTest binary: rank 0 prints the usual report, the other
// ranks only their failures (tagged with the rank), and every rank exits non-zero when
// any rank failed.
//
// Example:
//   int main(int argc, char** argv) {
//     runtime::RankProcess process(&argc, &argv);
//     return axonn::test::run_tests_on_every_rank(&argc, argv, process.world().rank());
//   }
#pragma once

#include <cstdio>

#include <gtest/gtest.h>
#include <mpi.h>

namespace axonn::test {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// Exit code for main(): 1 when any rank had a failure.
inline int run_tests_on_every_rank(int* argc, char** argv, int rank) {
  ::testing::InitGoogleTest(argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}

}  // namespace axonn::test
