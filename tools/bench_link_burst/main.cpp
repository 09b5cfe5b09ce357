// bench_link_burst: what a link between two nodes carries after it idled, against what it
// carries back to back (docs/validation.md, "The emulator's token bucket"). Rank 0 sends
// a message of each size to --peer (the first rank of the next node) and waits for a
// one-byte answer; before each send both ranks meet at a barrier and rank 0 then stays
// silent for the gap. A link with a line rate and nothing else takes bytes / rate
// whatever the gap; a token bucket as deep as B lets an idle link pass up to B bytes at
// once. It prints the median over --reps sends of each (gap, size), and the rate.
//
//   tools/emulated_cluster.sh --nodes 2 --gpus-per-node 1 --rate 200mbit --
//       build/tools/bench_link_burst --peer 1            (one line; --burst 256kb: the old depth)
//
// Every MPI call goes through AXONN_CHECK (axonn_mpi_check: MPI without LibTorch); a
// failure ends every rank with its message (abort_job).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/core.h>
#include <thread>
#include <vector>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/runtime/abort_job.hpp"
#include "axonn/runtime/check.hpp"

namespace {

// Rank 0's table: for each gap and size, the median time of a send and its answer.
void run(int rank, int peer, int reps, const std::vector<int>& sizes_kib, const std::vector<double>& gaps_ms) {
  std::vector<char> buffer(static_cast<size_t>(*std::max_element(sizes_kib.begin(), sizes_kib.end())) * 1024, 1);
  char ack = 0;
  if (rank == 0) fmt::print("{:>8} {:>10} {:>10} {:>12}\n", "gap (ms)", "bytes", "time (ms)", "rate (MB/s)");
  for (double gap_ms : gaps_ms) {
    for (int kib : sizes_kib) {
      const int bytes = kib * 1024;
      std::vector<double> times;
      for (int k = 0; k <= reps; ++k) {  // the first send warms up and is dropped
        AXONN_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
          const double t0 = MPI_Wtime();
          AXONN_CHECK(MPI_Send(buffer.data(), bytes, MPI_CHAR, peer, 0, MPI_COMM_WORLD));
          AXONN_CHECK(MPI_Recv(&ack, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
          if (k > 0) times.push_back(MPI_Wtime() - t0);
        } else if (rank == peer) {
          AXONN_CHECK(MPI_Recv(buffer.data(), bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
          AXONN_CHECK(MPI_Send(&ack, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD));
        }
      }
      if (rank == 0) {
        const double t = axonn::median(times);
        fmt::print("{:>8.0f} {:>10} {:>10.2f} {:>12.1f}\n", gap_ms, bytes, t * 1e3, bytes / t / 1e6);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a link's time for a message after it idled, against back to back"};
  int peer = 1, reps = 8;
  std::vector<int> sizes_kib{32, 64, 128, 192, 256, 384, 512, 1024, 2048};
  std::vector<double> gaps_ms{0, 5, 10, 20, 50};
  app.add_option("--peer", peer, "the rank rank 0 sends to (the first rank of the next node)")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "sends of each size after each gap; the median is printed")->check(CLI::PositiveNumber);
  app.add_option("--sizes-kib", sizes_kib, "message sizes, KiB")->check(CLI::PositiveNumber);
  app.add_option("--gaps-ms", gaps_ms, "silence before each send, milliseconds")->check(CLI::NonNegativeNumber);
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "bench_link_burst: MPI_Init failed\n");
    return axonn::kExitComm;
  }
  int rank = 0, size = 1;
  try {
    AXONN_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    AXONN_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    AXONN_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = rank == 0 ? app.exit(e) : axonn::kExitUsage;
      MPI_Finalize();
      return rc == 0 ? 0 : axonn::kExitUsage;
    }
    if (peer >= size) {
      if (rank == 0)
        fmt::print(stderr, "bench_link_burst: --peer {} needs at least {} ranks, have {}\n", peer, peer + 1, size);
      MPI_Finalize();
      return axonn::kExitUsage;
    }
    run(rank, peer, reps, sizes_kib, gaps_ms);
  } catch (const axonn::Error& e) {
    axonn::runtime::abort_job(e.what(), axonn::exit_code(e));
  } catch (const std::exception& e) {
    axonn::runtime::abort_job(e.what(), axonn::kExitInternal);
  }
  MPI_Finalize();
  return 0;
}
