// Strict reading of JSON files into typed structs.
//
// Every configuration file of axonn (topology, model description, plan) is read
// through ObjectReader, which
//  - names the file and the JSON pointer of every value it rejects,
//  - rejects unknown keys (finish()), missing required keys and wrong types,
//  - checks ranges (positive sizes, etc.).
//
// Example:
//   auto j = axonn::read_json_file("topology", "cluster.json");
//   axonn::ObjectReader r(j, "cluster.json", "topology");
//   int64_t gpn = r.positive_int("gpus_per_node");
//   double bw = r.positive_number("inter_node_bandwidth_bytes_per_s");
//   r.finish();   // throws: "[topology] unknown field: cluster.json: /gpn; expected one of ..."
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace axonn {

// Deeper JSON is refused: our documents nest a few levels (a plan embeds a topology).
inline constexpr int kMaxJsonDepth = 64;

// Parses a whole file; throws axonn::Error naming the file (and line/column of a
// syntax error) when it cannot be opened or is not valid JSON, when an object has a
// key twice, or when it nests deeper than kMaxJsonDepth.
nlohmann::json read_json_file(const std::string& module, const std::string& path);
// Parses text that came from `origin` (a file name or "<stdin>").
nlohmann::json parse_json_text(const std::string& module, const std::string& text,
                               const std::string& origin);

class ObjectReader {
 public:
  // `j` must outlive the reader. `pointer` is the JSON pointer of `j` in its file.
  ObjectReader(const nlohmann::json& j, std::string file, std::string module,
               std::string pointer = "");

  bool has(const std::string& key) const;

  int64_t integer(const std::string& key);                 // any integer
  int64_t positive_int(const std::string& key);            // >= 1
  // >= 1 and <= `most`: sizes whose products the planner forms, and counts it expands
  // into memory, bounded so that neither overflows.
  int64_t positive_int_at_most(const std::string& key, int64_t most);
  int64_t non_negative_int(const std::string& key);        // >= 0
  double positive_number(const std::string& key);          // > 0, finite
  double non_negative_number(const std::string& key);      // >= 0, finite
  bool boolean(const std::string& key);
  std::string string(const std::string& key);
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed);
  std::vector<std::string> string_array(const std::string& key);

  // Optional variants: the default when the key is absent.
  int64_t positive_int_or(const std::string& key, int64_t fallback);
  int64_t non_negative_int_or(const std::string& key, int64_t fallback);
  double positive_number_or(const std::string& key, double fallback);
  double non_negative_number_or(const std::string& key, double fallback);
  bool boolean_or(const std::string& key, bool fallback);
  std::string string_or(const std::string& key, const std::string& fallback);

  // Nested values.
  ObjectReader object(const std::string& key);
  std::vector<ObjectReader> object_array(const std::string& key);
  const nlohmann::json& raw(const std::string& key);  // marks the key as read

  // Throws for the first key that was never read (an unknown field).
  void finish() const;

  // Throws an error about `key` in this object.
  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         const std::string& expected) const;
  std::string where(const std::string& key) const;  // "file: /pointer/key"
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& value(const std::string& key, nlohmann::json::value_t type,
                              const char* expected);
  const nlohmann::json* j_;
  std::string file_, module_, pointer_;
  std::set<std::string> read_;           // keys consumed
  mutable std::set<std::string> known_;  // keys asked for, present or not (for messages)
};

}  // namespace axonn
