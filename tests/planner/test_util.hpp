// Helpers shared by the planner tests: temporary files and error capture.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "axonn/common/error.hpp"

namespace axonn::test {

// Writes `content` to a fresh file under the system temp directory; returns its path.
inline std::string write_temp(const std::string& name, const std::string& content) {
  auto dir = std::filesystem::temp_directory_path() / ("axonn_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
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
