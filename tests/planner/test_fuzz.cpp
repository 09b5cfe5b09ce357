// Fuzzed inputs (issue: reliability): mutations of a shipped model (gpt-tiny), a
// shipped cluster (perlmutter) and a plan, each written to a file and handed to what
// reads it: `axplan rank` (in-process, run_axplan) for models and clusters, and
// plan::load_plan (axrun's plan loading) for plans. No case may crash, hang or end
// otherwise than with a clear error (exit 2, an axonn::InputError naming the file).
//
// Mutations, 40 cases each per document (1080 in all), from one seeded generator:
//   truncated       cut before the closing brace                        -> must be refused
//   wrong type      a value replaced by one of another JSON type        -> must be refused
//   unknown field   a key added to an object                            -> must be refused
//   duplicate key   a member line repeated                              -> must be refused
//   deep nesting    a value replaced by 200 nested arrays               -> must be refused
//   binary bytes    a control byte or 0xFF inserted                     -> must be refused
//   NaN             a number replaced by the literal NaN                -> must be refused
//   huge/negative   a number replaced by -1, -1e300, 1e308 or 2^63 - 1  -> refused, or valid
//   missing field   a key removed                                       -> refused, or valid
// (the last two may leave a valid document: an optional key, a range without a limit;
// a valid model may still be too large for the cluster: "no feasible candidate").
// The first run of this test found a model of 2^63 - 1 layers running out of memory
// while expanding (2 minutes, then std::bad_alloc, exit 1) and a cluster of 2^63 - 1
// GPUs per node overflowing; widths, layer and GPU counts now have upper bounds.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "axplan_cli.hpp"
#include "test_util.hpp"

using namespace axonn;

namespace {

enum class Mutation { Truncate, WrongType, Unknown, Duplicate, Deep, Binary, NaN, Huge, Missing };
constexpr Mutation kMutations[] = {Mutation::Truncate, Mutation::WrongType, Mutation::Unknown,
                                   Mutation::Duplicate, Mutation::Deep,      Mutation::Binary,
                                   Mutation::NaN,       Mutation::Huge,      Mutation::Missing};
const char* name_of(Mutation m) {
  static const char* names[] = {"truncated", "wrong type", "unknown field", "duplicate key", "deep nesting",
                                "binary bytes", "NaN", "huge/negative", "missing field"};
  return names[static_cast<int>(m)];
}
bool must_fail(Mutation m) { return m != Mutation::Huge && m != Mutation::Missing; }

// Every JSON pointer of `j` whose value satisfies `keep`.
template <class Keep>
void pointers(const nlohmann::json& j, const std::string& at, Keep keep, std::vector<std::string>& out) {
  if (keep(j)) out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) pointers(it.value(), at + "/" + it.key(), keep, out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) pointers(j[i], at + "/" + std::to_string(i), keep, out);
}

std::string mutate(const nlohmann::json& doc, Mutation m, std::mt19937& rng) {
  auto pick = [&](const std::vector<std::string>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  auto leaves = [&](auto keep) {
    std::vector<std::string> v;
    pointers(doc, "", keep, v);
    return v;
  };
  nlohmann::json j = doc;
  const std::string text = doc.dump(2);
  switch (m) {
    case Mutation::Truncate:
      return text.substr(0, std::uniform_int_distribution<size_t>(1, text.rfind('}') - 1)(rng));
    case Mutation::WrongType: {
      const auto at = nlohmann::json::json_pointer(pick(leaves([](const nlohmann::json& v) { return v.is_primitive(); })));
      const nlohmann::json old = j[at];
      const std::vector<nlohmann::json> others = {"fuzz", 12345, nlohmann::json::array({1, 2}),
                                                  nlohmann::json{{"a", 1}}, true, nullptr};
      nlohmann::json v;
      do v = others[std::uniform_int_distribution<size_t>(0, others.size() - 1)(rng)];
      while (v.type() == old.type() || (v.is_number() && old.is_number()));
      j[at] = v;
      return j.dump(2);
    }
    case Mutation::Unknown: {
      const auto at = nlohmann::json::json_pointer(pick(leaves([](const nlohmann::json& v) { return v.is_object(); })));
      j[at]["fuzz_unknown_field"] = 1;
      return j.dump(2);
    }
    case Mutation::Duplicate: {
      std::vector<std::string> lines;
      std::stringstream ss(text);
      for (std::string line; std::getline(ss, line);) lines.push_back(line);
      std::vector<size_t> members;  // "key": scalar, (followed by another member)
      for (size_t i = 0; i < lines.size(); ++i) {
        const auto& l = lines[i];
        if (l.find("\": ") != std::string::npos && !l.empty() && l.back() == ',' && l.find('{') == std::string::npos &&
            l.find('[') == std::string::npos)
          members.push_back(i);
      }
      const size_t i = members[std::uniform_int_distribution<size_t>(0, members.size() - 1)(rng)];
      lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
      std::string out;
      for (const auto& l : lines) out += l + "\n";
      return out;
    }
    case Mutation::Deep: {
      const auto at = nlohmann::json::json_pointer(pick(leaves([](const nlohmann::json& v) { return v.is_primitive(); })));
      j[at] = "__DEEP__";
      std::string out = j.dump(2);
      out.replace(out.find("\"__DEEP__\""), 10, std::string(200, '[') + std::string(200, ']'));
      return out;
    }
    case Mutation::Binary: {
      static const unsigned char bad[] = {0x00, 0x01, 0x07, 0x08, 0x0B, 0x0C, 0x0E, 0x1B, 0x1F, 0xFF};
      std::string out = text;
      out.insert(std::uniform_int_distribution<size_t>(0, out.size())(rng), 1,
                 static_cast<char>(bad[std::uniform_int_distribution<size_t>(0, sizeof(bad) - 1)(rng)]));
      return out;
    }
    case Mutation::NaN:
    case Mutation::Huge: {
      const auto at = nlohmann::json::json_pointer(pick(leaves([](const nlohmann::json& v) { return v.is_number(); })));
      j[at] = "__NUMBER__";
      static const char* huge[] = {"-1", "-1e300", "1e308", "9223372036854775807"};
      const std::string value = m == Mutation::NaN ? "NaN" : huge[std::uniform_int_distribution<int>(0, 3)(rng)];
      std::string out = j.dump(2);
      out.replace(out.find("\"__NUMBER__\""), 12, value);
      return out;
    }
    case Mutation::Missing: {
      const auto at = nlohmann::json::json_pointer(
          pick(leaves([](const nlohmann::json& v) { return v.is_object() && !v.empty(); })));
      auto& obj = j[at];
      auto it = obj.begin();
      std::advance(it, std::uniform_int_distribution<long>(0, static_cast<long>(obj.size()) - 1)(rng));
      obj.erase(it.key());
      return j.dump(2);
    }
  }
  return text;
}

// What reading the file gave: the exit code (2 for input errors) and the message.
struct Outcome {
  int code = 0;
  std::string message;
};

Outcome rank_with(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Outcome o;
  o.code = tools::run_axplan(args, out, err);
  o.message = err.str();
  return o;
}

Outcome load_plan_file(const std::string& path) {
  Outcome o;
  try {
    plan::load_plan(path);
  } catch (const InputError& e) {
    o = {2, e.what()};
  } catch (const Error& e) {
    o = {exit_code(e), e.what()};
  } catch (const std::exception& e) {
    o = {1, std::string("not an axonn::Error: ") + e.what()};
  }
  return o;
}

}  // namespace

TEST(Fuzz, MutatedModelsClustersAndPlansAreRefusedClearly) {
  planner::PlannerOptions o;
  o.gpus = 4;
  o.batch_seqs = 8;
  const model::ModelDescription tiny = model::load_model("gpt-tiny");
  const topo::Topology perlmutter = topo::load_topology("perlmutter");
  const planner::Ranking r = planner::rank_candidates(tiny, perlmutter, o);
  ASSERT_FALSE(r.feasible.empty());
  struct Document {
    const char* kind;
    nlohmann::json json;
  };
  const std::vector<Document> docs = {
      {"model", tiny.source},
      {"topology", topo::topology_to_json(perlmutter)},
      {"plan", plan::plan_to_json(planner::make_plan(tiny, perlmutter, o, r.feasible.front(), 1, 1))}};
  std::mt19937 rng(20261124);
  const int per_mutation = 40;
  int cases = 0, refused = 0;
  for (const auto& d : docs)
    for (Mutation m : kMutations)
      for (int i = 0; i < per_mutation; ++i, ++cases) {
        const std::string text = mutate(d.json, m, rng);
        const std::string path = test::write_temp(std::string("fuzz_") + d.kind + ".json", text);

        const std::string kind = d.kind;
        const Outcome out = kind == "plan" ? load_plan_file(path)
                            : kind == "model"
                                ? rank_with({"axplan", "rank", "--model", path, "--topology", "perlmutter", "--gpus", "4",
                                             "--batch-seqs", "8"})
                                : rank_with({"axplan", "rank", "--model", "gpt-tiny", "--topology", path, "--gpus", "4",
                                             "--batch-seqs", "8"});
        const std::string what = std::string(d.kind) + ", " + name_of(m) + " #" + std::to_string(i) + ": " +
                                 text.substr(0, 160);
        if (must_fail(m)) EXPECT_EQ(out.code, 2) << what << "\n" << out.message;
        else EXPECT_TRUE(out.code == 0 || out.code == 2) << what << "\n" << out.message;
        if (out.code == 2) {
          ++refused;
          // A reading error names the file; a valid document may still ask for more than
          // the cluster has (a model of the largest widths on 4 GPUs).
          const bool names_file = out.message.find(path) != std::string::npos;
          const bool infeasible = !must_fail(m) && out.message.find("no feasible candidate") != std::string::npos;
          EXPECT_TRUE(names_file || infeasible) << "the message names the file: " << out.message;
        }
      }
  EXPECT_GE(cases, 1000);
  std::cout << "[ fuzz     ] " << cases << " cases, " << refused << " refused with exit 2, "
            << cases - refused << " still valid (huge numbers within range, optional keys removed)\n";
}
