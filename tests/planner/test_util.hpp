// Helpers shared by the planner tests: temporary files and error capture.
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

namespace axonn::test {

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
