// Helpers shared by the planner tests: temporary files, error capture and a minimal
// calibrate measurement.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>

#include <unistd.h>

#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/common/remove_tree.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/measurements.hpp"

namespace axonn::test {

// 8 GPUs, 16 sequences, no memory limit, no overlap: the options of the evaluator tests
// of the sync wait and the lent cores.
inline planner::PlannerOptions eight_ranks_synchronous() {
  planner::PlannerOptions o;
  o.gpus = 8;
  o.batch_seqs = 16;
  o.memory_limit = false;
  o.overlap = plan::OverlapSettings::synchronous();
  return o;
}

// What calibrate needs at least to write a topology: 4 ranks on 2 nodes of 2 and the
// ring over all 4 (ip 1) timed at 1 and 4 MB (latency 100 us, 100 MB/s).
inline topo::ClusterMeasurements four_ranks_two_nodes() {
  topo::ClusterMeasurements m;
  m.world = 4;
  m.gpus_per_node = 2;
  for (double bytes : {1e6, 4e6})
    m.collectives.push_back({topo::CollectiveOp::AllGather, 1, 4, false, bytes, 1e-4 + bytes / 1e8});
  return m;
}

// This test process's scratch directory under the system temp directory, removed with
// everything in it when the process exits.
inline const std::filesystem::path& scratch_dir() {
  struct Scratch {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("axonn_test_" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(path); }
    ~Scratch() {
      std::error_code ignored;
      axonn::remove_tree(path.string(), ignored);
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

// Writes `content` to a fresh file in the scratch directory; returns its path.
inline std::string write_temp(const std::string& name, const std::string& content) {
  auto path = scratch_dir() / name;
  std::ofstream(path) << content;
  return path.string();
}

// Runs `f`, expects an axonn::Error, returns its message ("" and a test failure otherwise).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const axonn::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected axonn::Error";
  return "";
}

}  // namespace axonn::test
