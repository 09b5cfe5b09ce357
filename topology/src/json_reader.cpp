// Strict JSON reading; see axonn/common/json_reader.hpp.
#include "axonn/common/json_reader.hpp"

#include <cmath>
#include <set>
#include <vector>
#include <fstream>
#include <sstream>

#include "axonn/common/error.hpp"

namespace axonn {

nlohmann::json parse_json_text(const std::string& module, const std::string& text,
                               const std::string& origin) {
  // Stricter than nlohmann's default: a key twice in one object (which it would let the
  // last win) and nesting deeper than any of our files needs are refused while parsing.
  std::vector<std::set<std::string>> keys;  // of each open object (arrays: empty sets)
  auto strict = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (depth >= kMaxJsonDepth)
        throw InputError(module, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", origin,
                         "a model, topology or plan document (a few levels deep)");
      keys.emplace_back();
    } else if (event == E::object_end || event == E::array_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == E::key && !keys.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys.back().insert(key).second)
        throw InputError(module, "duplicate key \"" + key + "\"", origin + " (at depth " + std::to_string(depth) + ")",
                         "each key once per object");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, strict);
  } catch (const nlohmann::json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    // (also out_of_range.406: a number too large for a double).
    std::string msg = e.what();
    auto pos = msg.find("] ");
    if (pos != std::string::npos) msg = msg.substr(pos + 2);
    throw InputError(module, "malformed JSON", origin + ": " + msg, "a valid JSON document");
  }
}

nlohmann::json read_json_file(const std::string& module, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(module, "cannot open file", path, "a readable JSON file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json_text(module, ss.str(), path);
}

ObjectReader::ObjectReader(const nlohmann::json& j, std::string file, std::string module,
                           std::string pointer)
    : j_(&j), file_(std::move(file)), module_(std::move(module)), pointer_(std::move(pointer)) {
  if (!j.is_object())
    throw InputError(module_, "wrong type", file_ + ": " + (pointer_.empty() ? "/" : pointer_),
                "a JSON object");
}

bool ObjectReader::has(const std::string& key) const {
  known_.insert(key);
  return j_->contains(key);
}

std::string ObjectReader::where(const std::string& key) const {
  return file_ + ": " + pointer_ + "/" + key;
}

void ObjectReader::fail(const std::string& key, const std::string& what,
                        const std::string& expected) const {
  throw InputError(module_, what, where(key), expected);
}

const nlohmann::json& ObjectReader::value(const std::string& key, nlohmann::json::value_t type,
                                          const char* expected) {
  known_.insert(key);
  auto it = j_->find(key);
  if (it == j_->end()) fail(key, "missing field", expected);
  read_.insert(key);
  const auto& v = *it;
  bool ok = false;
  switch (type) {
    case nlohmann::json::value_t::number_integer:
      ok = v.is_number_integer();
      break;
    case nlohmann::json::value_t::number_float:
      ok = v.is_number();
      break;
    case nlohmann::json::value_t::boolean:
      ok = v.is_boolean();
      break;
    case nlohmann::json::value_t::string:
      ok = v.is_string();
      break;
    case nlohmann::json::value_t::object:
      ok = v.is_object();
      break;
    case nlohmann::json::value_t::array:
      ok = v.is_array();
      break;
    default:
      ok = false;
  }
  if (!ok) fail(key, "wrong type (found " + v.dump() + ")", expected);
  return v;
}

int64_t ObjectReader::integer(const std::string& key) {
  return value(key, nlohmann::json::value_t::number_integer, "an integer").get<int64_t>();
}

int64_t ObjectReader::positive_int(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::number_integer, "an integer >= 1");
  int64_t x = v.get<int64_t>();
  if (x < 1) fail(key, "value " + v.dump() + " out of range", "an integer >= 1");
  return x;
}

int64_t ObjectReader::positive_int_at_most(const std::string& key, int64_t most) {
  const std::string expected = "an integer from 1 to " + std::to_string(most);
  const auto& v = value(key, nlohmann::json::value_t::number_integer, expected.c_str());
  const int64_t x = v.get<int64_t>();
  if (x < 1 || x > most) fail(key, "value " + v.dump() + " out of range", expected);
  return x;
}

int64_t ObjectReader::non_negative_int(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::number_integer, "an integer >= 0");
  int64_t x = v.get<int64_t>();
  if (x < 0) fail(key, "value " + v.dump() + " out of range", "an integer >= 0");
  return x;
}

double ObjectReader::positive_number(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::number_float, "a number > 0");
  double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x)) fail(key, "value " + v.dump() + " out of range", "a number > 0");
  return x;
}

double ObjectReader::non_negative_number(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::number_float, "a number >= 0");
  double x = v.get<double>();
  if (!(x >= 0) || !std::isfinite(x))
    fail(key, "value " + v.dump() + " out of range", "a number >= 0");
  return x;
}

bool ObjectReader::boolean(const std::string& key) {
  return value(key, nlohmann::json::value_t::boolean, "true or false").get<bool>();
}

std::string ObjectReader::string(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::string, "a non-empty string");
  auto s = v.get<std::string>();
  if (s.empty()) fail(key, "empty string", "a non-empty string");
  return s;
}

std::string ObjectReader::one_of(const std::string& key, const std::vector<std::string>& allowed) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
  const auto& v = value(key, nlohmann::json::value_t::string, ("one of " + list).c_str());
  auto s = v.get<std::string>();
  for (const auto& a : allowed)
    if (s == a) return s;
  fail(key, "unsupported value \"" + s + "\"", "one of " + list);
}

std::vector<std::string> ObjectReader::string_array(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::array, "an array of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) fail(key, "wrong element type (found " + e.dump() + ")", "an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

int64_t ObjectReader::positive_int_or(const std::string& key, int64_t fallback) {
  return has(key) ? positive_int(key) : fallback;
}
int64_t ObjectReader::non_negative_int_or(const std::string& key, int64_t fallback) {
  return has(key) ? non_negative_int(key) : fallback;
}
double ObjectReader::positive_number_or(const std::string& key, double fallback) {
  return has(key) ? positive_number(key) : fallback;
}
double ObjectReader::non_negative_number_or(const std::string& key, double fallback) {
  return has(key) ? non_negative_number(key) : fallback;
}
bool ObjectReader::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? boolean(key) : fallback;
}
std::string ObjectReader::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

ObjectReader ObjectReader::object(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::object, "a JSON object");
  return ObjectReader(v, file_, module_, pointer_ + "/" + key);
}

std::vector<ObjectReader> ObjectReader::object_array(const std::string& key) {
  const auto& v = value(key, nlohmann::json::value_t::array, "an array of objects");
  std::vector<ObjectReader> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_object())
      throw InputError(module_, "wrong element type (found " + v[i].dump() + ")",
                  where(key) + "/" + std::to_string(i), "a JSON object");
    out.emplace_back(v[i], file_, module_, pointer_ + "/" + key + "/" + std::to_string(i));
  }
  return out;
}

const nlohmann::json& ObjectReader::raw(const std::string& key) {
  known_.insert(key);
  auto it = j_->find(key);
  if (it == j_->end()) fail(key, "missing field", "a value");
  read_.insert(key);
  return *it;
}

void ObjectReader::finish() const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (read_.count(it.key())) continue;
    std::string known;
    for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
    fail(it.key(), "unknown field", known.empty() ? "no fields here" : "one of: " + known);
  }
}

}  // namespace axonn
