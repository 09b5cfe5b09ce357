// axplan end to end, in-process: output formats and every kind of bad input
// (exit code 2 with a message naming the file/flag and what was expected).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "axonn/plan/plan.hpp"
#include "axonn/topology/topology_io.hpp"
#include "axplan_cli.hpp"
#include "svg_plot.hpp"
#include "test_util.hpp"

using axonn::test::write_temp;

namespace {

struct Run {
  int rc;
  std::string out, err;
};

Run axplan(std::vector<std::string> args) {
  args.insert(args.begin(), "axplan");
  std::ostringstream out, err;
  int rc = axonn::tools::run_axplan(args, out, err);
  return {rc, out.str(), err.str()};
}

const std::vector<std::string> kGpt20b = {"--model", "gpt-20b", "--topology", "perlmutter", "--gpus", "32",
                                          "--batch-tokens", "32768"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// One CSV row's fields (RFC 4180): a quoted field may hold commas, and "" inside it is a quote.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') field += line[++i];
    else if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) f.push_back(std::exchange(field, ""));
    else field += ch;
  }
  f.push_back(field);
  return f;
}

void expect_usage_error(const Run& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
}

}  // namespace

TEST(Cli, RankTableShowsRankedGrids) {
  auto r = axplan(with({"rank"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("gpt-20b on 32 GPUs of perlmutter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("comm (s)"), std::string::npos);
  EXPECT_NE(r.out.find("mem (GiB)"), std::string::npos);
}

TEST(Cli, PaperModeJsonIsSortedWithTheBreakdownKeys) {
  auto r = axplan(with({"rank", "--comm-model", "paper", "--format", "json", "--top", "0"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const auto& c = j["candidates"];
  ASSERT_EQ(c.size(), j["candidates_feasible"].get<size_t>());
  ASSERT_GT(c.size(), 5u);
  double prev = 0;
  for (const auto& e : c) {
    EXPECT_EQ(e["ginter"], 1);
    EXPECT_EQ(e["gx"].get<int>() * e["gy"].get<int>() * e["gz"].get<int>() * e["gdata"].get<int>(), 32);
    double sum = 0;
    for (const char* k : {"ag_z", "rs_z", "ar_x", "ar_y", "ar_data"}) sum += e["comm_breakdown_s"][k].get<double>();
    EXPECT_NEAR(sum, e["comm_s"].get<double>(), 1e-12);
    EXPECT_GE(e["comm_s"].get<double>(), prev);
    prev = e["comm_s"].get<double>();
  }
}

TEST(Cli, CsvHasOneRowPerCandidate) {
  auto r = axplan(with({"rank", "--format", "csv", "--top", "3"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4);
  EXPECT_EQ(r.out.rfind("rank,gx,gy,gz,gdata,ginter", 0), 0u);
}

TEST(Cli, SearchMemoryOptionsShowsEachGridsOptimizer) {
  auto plain = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0"}, kGpt20b)).out);
  auto r = axplan(with({"rank", "--format", "json", "--top", "0", "--search-memory-options"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["candidates_feasible"].get<int>(), plain["candidates_feasible"].get<int>());
  std::set<std::string> seen;
  for (const auto& c : j["candidates"]) seen.insert(c["optimizer"].get<std::string>());
  EXPECT_GT(seen.size(), 1u);  // not every grid keeps Adam on the device
  auto table = axplan(with({"rank", "--top", "3", "--search-memory-options"}, kGpt20b));
  EXPECT_NE(table.out.find("optimizer"), std::string::npos) << table.out;
}

TEST(Cli, ShowRejectedListsReasons) {
  auto r = axplan(with({"rank", "--show-rejected", "--top", "1"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("rejected:"), std::string::npos);
  EXPECT_NE(r.out.find("GiB >"), std::string::npos);
}

// --tensor-mode all: one CSV table of every mode's candidates, each row naming its
// strategy, the rejected ones with their reasons; the JSON carries the same rows.
TEST(Cli, EveryModeRanksInOneTableWithItsStrategyAndRejectedReasons) {
  const std::vector<std::string> all = {"rank", "--tensor-mode", "all", "--top", "0", "--show-rejected"};
  auto csv = axplan(with(with(all, {"--format", "csv"}), kGpt20b));
  ASSERT_EQ(csv.rc, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> header;
  for (std::istringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  for (const char* name : {"rank", "batch_s", "rejected_because", "strategy"})
    ASSERT_NE(std::find(header.begin(), header.end(), name), header.end()) << name;
  auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t rank_col = column("rank"), batch_col = column("batch_s"), why_col = column("rejected_because"),
               strategy_col = column("strategy");
  std::map<std::string, int> feasible, rejected;  // by strategy family ("sequence 2" -> "sequence")
  int rows = 0;
  double last_batch = 0;
  while (std::getline(lines, line)) {
    const auto f = csv_fields(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    const std::string family = f[strategy_col].substr(0, f[strategy_col].find(' '));
    if (f[why_col].empty()) {
      ++feasible[family];
      EXPECT_EQ(std::stoi(f[rank_col]), ++rows) << line;  // one ranking over every mode, by batch time
      EXPECT_GE(std::stod(f[batch_col]), last_batch) << line;
      last_batch = std::stod(f[batch_col]);
    } else {
      ++rejected[family];
    }
  }
  for (const char* s : {"4d", "1d", "2d", "2d-broadcast", "sequence"}) EXPECT_GT(feasible[s], 0) << s;
  for (const char* s : {"4d", "1d", "2d", "3d", "sequence"}) EXPECT_GT(rejected[s], 0) << s;

  auto json = axplan(with(with(all, {"--format", "json"}), kGpt20b));
  ASSERT_EQ(json.rc, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["candidates"].size(), static_cast<size_t>(rows));
  int json_rejected = 0, csv_rejected = 0;
  for (const auto& [family, n] : rejected) csv_rejected += n;
  for (const auto& r : j["rejected"]) {
    EXPECT_FALSE(r["rejected_because"].get<std::string>().empty());
    EXPECT_FALSE(r["strategy"].get<std::string>().empty());
    ++json_rejected;
  }
  EXPECT_EQ(json_rejected, csv_rejected);
}

TEST(Cli, CsvQuotesAReasonThatNamesALayerWithQuotesAndCommas) {
  // A user's layer name, with a quote and a comma, reaches the rejected reasons; the CSV
  // row still has every column, and the reason reads back as the JSON gives it.
  auto model = write_temp("quoted_layer.json", R"({"name": "q", "family": "explicit", "seq_len": 64, "hidden": 64,
    "layers": [{"name": "up \"wide\", odd", "type": "linear", "k": 64, "n": 99, "role": "column"}]})");
  const std::vector<std::string> args = {"rank", "--model", model, "--topology", "perlmutter", "--gpus", "8",
                                         "--batch-seqs", "8", "--top", "0", "--show-rejected"};
  auto csv = axplan(with(args, {"--format", "csv"}));
  ASSERT_EQ(csv.rc, 0) << csv.err;
  auto json = axplan(with(args, {"--format", "json"}));
  ASSERT_EQ(json.rc, 0) << json.err;
  std::set<std::string> json_reasons, csv_reasons;
  const auto parsed = nlohmann::json::parse(json.out);
  for (const auto& r : parsed.at("rejected"))
    json_reasons.insert(r["rejected_because"].get<std::string>());
  std::istringstream lines(csv.out);
  std::string line;
  std::getline(lines, line);
  const auto header = csv_fields(line);
  const size_t why = static_cast<size_t>(std::find(header.begin(), header.end(), "rejected_because") - header.begin());
  ASSERT_LT(why, header.size());
  while (std::getline(lines, line)) {
    const auto f = csv_fields(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    if (!f[why].empty()) csv_reasons.insert(f[why]);
  }
  ASSERT_TRUE(std::any_of(json_reasons.begin(), json_reasons.end(),
                          [](const std::string& r) { return r.find("layer up \"wide\", odd:") != std::string::npos; }))
      << "no reason names the layer; the model no longer exercises the quoting";
  EXPECT_EQ(csv_reasons, json_reasons);
}

TEST(Cli, PlanWritesALoadablePlan) {
  auto path = write_temp("cli_plan.json", "");
  auto r = axplan(with({"plan", "--output", path}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto p = axonn::plan::load_plan(path);
  EXPECT_EQ(p.gpus, 32);
  EXPECT_EQ(p.prediction->rank, 1);
  EXPECT_TRUE(p.overlap.prefetch_all_gather);
  r = axplan(with({"plan", "--output", path, "--grid", "4,1,1,1,8"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  p = axonn::plan::load_plan(path);
  EXPECT_EQ(p.grid, (axonn::topo::Grid{4, 1, 1, 1, 8}));
  EXPECT_GT(p.prediction->rank, 1);
}

TEST(Cli, BenchReportsThroughput) {
  auto r = axplan({"bench", "--gpus", "64", "--model", "gpt-5b", "--repeat", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("candidates evaluated per second"), std::string::npos);
}

TEST(CliErrors, MalformedJson) {
  auto path = write_temp("bad_model.json", "{\"name\": \"m\", \"family\": \"gpt\" \"hidden\": 3}");
  expect_usage_error(axplan({"rank", "--model", path, "--gpus", "4", "--batch-seqs", "4"}), "malformed JSON");
  expect_usage_error(axplan({"rank", "--model", path, "--gpus", "4", "--batch-seqs", "4"}), path);
}

TEST(CliErrors, UnknownAndMissingFields) {
  auto unknown = write_temp("unknown.json", R"({"name": "m", "family": "gpt", "num_layers": 2, "hidden": 64,
      "heads": 4, "seq_len": 16, "vocab": 256, "dropout": 0.1})");
  expect_usage_error(axplan({"rank", "--model", unknown, "--gpus", "4", "--batch-seqs", "4"}),
                     "unknown field: " + unknown + ": /dropout");
  auto missing = write_temp("missing.json", R"({"name": "t", "gpus_per_node": 4, "num_nodes": 2,
      "peak_flops_per_s": 1e12, "intra_node_bandwidth_bytes_per_s": 1e11, "inter_node_bandwidth_bytes_per_s": 1e10})");
  expect_usage_error(axplan({"rank", "--topology", missing, "--gpus", "4", "--batch-seqs", "4"}),
                     "missing field: " + missing + ": /gpu_memory_bytes");
}

TEST(CliErrors, ZeroOrNegativeSizes) {
  auto zero = write_temp("zero.json", R"({"name": "m", "family": "gpt", "num_layers": 0, "hidden": 64,
      "heads": 4, "seq_len": 16, "vocab": 256})");
  expect_usage_error(axplan({"rank", "--model", zero, "--gpus", "4", "--batch-seqs", "4"}), "/num_layers");
  expect_usage_error(axplan({"rank", "--model", "gpt-tiny", "--gpus", "-4", "--batch-seqs", "4"}), "--gpus");
  expect_usage_error(axplan({"rank", "--model", "gpt-tiny", "--gpus", "4", "--batch-seqs", "0"}), "at least one sequence");
  expect_usage_error(axplan({"rank", "--model", "gpt-20b", "--gpus", "4", "--batch-tokens", "1000"}),
                     "multiple of the model's seq_len = 2048");
}

TEST(CliErrors, GpuCountLargerThanTopology) {
  expect_usage_error(axplan({"rank", "--model", "gpt-20b", "--topology", "dgx-h100", "--gpus", "512",
                             "--batch-seqs", "512"}),
                     "at most num_nodes * gpus_per_node = 32 * 8 = 256");
}

TEST(CliErrors, NoFeasibleCandidateSaysWhy) {
  auto r = axplan({"rank", "--model", "gpt-80b", "--topology", "perlmutter", "--gpus", "8", "--batch-seqs", "8"});
  expect_usage_error(r, "no feasible candidate: smallest memory per GPU is");
  EXPECT_NE(r.err.find("GiB > 40.0 GiB"), std::string::npos) << r.err;
}

TEST(CliErrors, BadFlagsAndGrids) {
  expect_usage_error(axplan({"rank", "--gpus", "4", "--batch-seqs", "4", "--bogus"}), "usage error");
  expect_usage_error(axplan({"rank", "--gpus", "4", "--batch-seqs", "4", "--format", "xml"}), "--format");
  expect_usage_error(axplan({"rank", "--gpus", "4"}), "no batch size given");
  expect_usage_error(axplan({"rank", "--gpus", "4", "--batch-seqs", "4", "--order", "x,y"}), "--order");
  expect_usage_error(axplan({"frobnicate"}), "usage error");
  expect_usage_error(axplan(with({"plan", "--grid", "2,2,2,2,1"}, kGpt20b)), "grid product 16 differs");
  expect_usage_error(axplan(with({"plan", "--grid", "3,2,2,2,x"}, kGpt20b)), "bad grid value");
  expect_usage_error(axplan({"plan", "--model", "gpt-20b", "--gpus", "32", "--batch-seqs", "32", "--grid", "1,1,1,32,1"}),
                     "grid rejected: memory");
  expect_usage_error(axplan(with({"plan", "--grid", "1,1,1,32,1"}, kGpt20b)), "not divisible by gdata=32");
  // t = 1 is a grid of AxoNN's 3D (plain data parallelism), not of Megatron's 1D: named, not "rejected: ".
  expect_usage_error(axplan({"plan", "--model", "gpt-tiny", "--topology", "perlmutter", "--gpus", "4", "--batch-seqs",
                             "4", "--tensor-mode", "1d", "--grid", "1,4,1"}),
                     "not a grid of --tensor-mode 1d");
  expect_usage_error(axplan({"rank", "--model", "no-such-model", "--gpus", "4", "--batch-seqs", "4"}), "gpt-20b");
  expect_usage_error(axplan({"rank", "--gpus", "4", "--batch-seqs", "4", "--zero", "4"}), "--zero: Value 4 not in range 0 to 3");
}

TEST(Cli, RankTableShowsBatchTimeSplit) {
  auto r = axplan(with({"rank", "--top", "3"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("batch (s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exposed"), std::string::npos) << r.out;
  auto paper = axplan(with({"rank", "--top", "3", "--comm-model", "paper"}, kGpt20b));
  EXPECT_EQ(paper.out.find("batch (s)"), std::string::npos) << paper.out;  // the paper ranks by communication
}

TEST(Cli, PlanRecordsThePredictedBatchTime) {
  const std::string path = write_temp("plan_batch.json", "");
  auto r = axplan(with({"plan", "--precision", "fp32", "-o", path}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto p = axonn::plan::load_plan(path);
  ASSERT_TRUE(p.prediction.has_value());
  EXPECT_GT(p.prediction->batch_s, 0);
  EXPECT_NEAR(p.prediction->batch_s, p.prediction->compute_s + p.prediction->exposed_comm_s, 1e-9);
  EXPECT_EQ(p.precision.compute_bytes, 4);
}

TEST(Svg, OneMarkerPerPointAndALegend) {
  axonn::tools::SvgPanel p;
  p.title = "a <b>";
  p.series.push_back({"s1", "#000", "circle", {{1, 2}, {2, 3}, {3, 1}}});
  p.series.push_back({"s2", "#111", "square", {{1, 1}}});
  p.diagonal = true;
  const std::string svg = axonn::tools::render_svg("t", {p, p});
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = svg.find(needle); at != std::string::npos; at = svg.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<circle"), 2u * (3 + 1));  // 3 points + 1 legend marker, per panel
  EXPECT_EQ(count("fill=\"#111\""), 2u * (1 + 1));
  EXPECT_EQ(count("stroke-dasharray"), 2u);   // y = x in each panel
  EXPECT_NE(svg.find("a &lt;b&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(Cli, ExplainShowsPlacementLayersAndVerdict) {
  auto r = axplan(with({"explain", "--grid", "4,2,2,2,1"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("grid gx=4 gy=2 gz=2 gdata=2 ginter=1: feasible"), std::string::npos) << r.out;
  // X of 4 stays in a Perlmutter node (225 GB/s); Y (ip 4) and Z (ip 8) cross nodes.
  EXPECT_NE(r.out.find("inside a node    225.00 GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("block0.fc1             linear       32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch time"), std::string::npos) << r.out;
  // The explanation's prediction is the ranking's.
  auto j = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0"}, kGpt20b)).out);
  bool found = false;
  for (const auto& c : j["candidates"]) {
    if (!(c["gx"] == 4 && c["gy"] == 2 && c["gz"] == 2 && c["gdata"] == 2 && c["ginter"] == 1)) continue;
    found = true;
    EXPECT_NE(r.out.find(fmt::format("batch time {:.4f} s", c["batch_s"].get<double>())), std::string::npos) << r.out;
  }
  EXPECT_TRUE(found);
  auto rejected = axplan(with({"explain", "--grid", "1,1,1,32,1"}, kGpt20b));
  ASSERT_EQ(rejected.rc, 0) << rejected.err;
  EXPECT_NE(rejected.out.find("rejected: batch sequences=16 is not divisible by gdata=32"), std::string::npos)
      << rejected.out;
  expect_usage_error(axplan(with({"explain", "--grid", "3,2,2,2,1"}, kGpt20b)), "grid product 24 differs");
  expect_usage_error(axplan(with({"explain"}, kGpt20b)), "--grid");
}

// On time-sliced ranks (topology cores_per_rank below 1) explain says which axes' rings
// cross nodes out of step with rings of other replicas or stages on their link, and what
// share of the passes those are on it; where inner tensor axes join every ring on the
// link (the default order), and on Perlmutter (dedicated cores), it says nothing of it.
TEST(Cli, ExplainNamesTheAxesWhoseRingsAreOutOfStep) {
  nlohmann::json j = axonn::topo::topology_to_json(axonn::topo::load_topology("perlmutter"));
  j["cores_per_rank"] = 0.25;
  const std::string sliced = write_temp("sliced_perlmutter.json", j.dump());
  auto explain = [&](const std::string& topology, const char* order) {
    return axplan({"explain", "--model", "gpt-20b", "--topology", topology, "--gpus", "32", "--batch-tokens", "32768",
                   "--grid", "4,2,2,2,1", "--order", order});
  };
  // 4,2,2,2,1 on 4-GPU nodes with the data axis innermost: X (ip 2) crosses with the two
  // replicas' rings on a link, Y (ip 8) and Z (ip 16) with 4 replicas' each.
  auto r = explain(sliced, "data,x,y,z,pipe");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::regex line(R"(
([xyz]): time-sliced ranks, its rings across nodes out of step; the other rings on its link for ([0-9]+)% of the passes)");
  std::set<std::string> axes;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
    axes.insert((*it)[1]);
    const int percent = std::stoi((*it)[2]);
    EXPECT_GE(percent, 0);
    EXPECT_LT(percent, 100) << r.out;
  }
  EXPECT_EQ(axes, (std::set<std::string>{"x", "y", "z"})) << r.out;
  for (const auto& [topology, order] : {std::pair{sliced, "x,y,z,pipe,data"}, std::pair{std::string("perlmutter"), "data,x,y,z,pipe"}}) {
    auto none = explain(topology, order);
    ASSERT_EQ(none.rc, 0) << none.err;
    EXPECT_EQ(none.out.find("out of step"), std::string::npos) << topology << ", " << order << ":\n" << none.out;
  }
}

// On time-sliced ranks with a measured waiting share, explain says how much faster a
// pipeline's stages compute while others wait (docs/model.md section 10); without the
// share, or without a pipeline, it says nothing of it.
TEST(Cli, ExplainSaysHowMuchFasterAPipelinesStagesComputeOnLentCores) {
  nlohmann::json j = axonn::topo::topology_to_json(axonn::topo::load_topology("perlmutter"));
  j["cores_per_rank"] = 0.25;
  j["num_nodes"] = 2;
  const std::string unmeasured = write_temp("sliced_unmeasured.json", j.dump());
  j["waiting_rank_share"] = {{"intra_node", 0.0}, {"inter_node", 1.0}};
  const std::string lending = write_temp("sliced_lending.json", j.dump());
  auto run = [](const std::string& topology, const char* grid) {
    return axplan({"explain", "--model", "gpt-bench", "--topology", topology, "--gpus", "8", "--batch-seqs", "16",
                   "--grid", grid});
  };
  const std::regex line(R"(
waiting stages lend their cores \(time-sliced ranks\): the stages compute ([0-9.]+)x faster than with every rank computing
)");
  auto r = run(lending, "1,1,2,1,4");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.out, match, line)) << r.out;
  EXPECT_GT(std::stod(match[1]), 1.0);
  EXPECT_LE(std::stod(match[1]), 4.0);
  for (const auto& [topology, grid] : {std::pair{unmeasured, "1,1,2,1,4"}, std::pair{lending, "1,1,2,4,1"}}) {
    auto none = run(topology, grid);
    ASSERT_EQ(none.rc, 0) << none.err;
    EXPECT_EQ(none.out.find("lend their cores"), std::string::npos) << none.out;
  }
}

// 2d-broadcast: --grid t,gdata,ginter makes the 2d grid in the broadcast layout, and
// explain lists SUMMA's moves per layer (they are inside the computes, not in the
// collective columns): q steps, each move's time and what the passes leave exposed.
TEST(Cli, ExplainShowsSummasMoves) {
  auto r = axplan(with({"explain", "--tensor-mode", "2d-broadcast", "--grid", "4,8,1", "--no-memory-limit"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("grid gx=1 gy=2 gz=2 gdata=8 ginter=1 2d-broadcast: feasible"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SUMMA's moves (2d-broadcast)"), std::string::npos) << r.out;
  const std::regex fc1(R"(\nblock0\.fc1\s+2\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\n)");
  EXPECT_TRUE(std::regex_search(r.out, fc1)) << r.out;
  EXPECT_EQ(r.out.find("\nembedding              2"), std::string::npos) << "the embedding is gathered, not SUMMA's";
  auto two = axplan(with({"explain", "--tensor-mode", "2d", "--grid", "4,8,1", "--no-memory-limit"}, kGpt20b));
  ASSERT_EQ(two.rc, 0) << two.err;
  EXPECT_EQ(two.out.find("SUMMA's moves"), std::string::npos) << two.out;
}

TEST(Cli, ExplainAndJsonShowThePipeline) {
  // 32 blocks on 8 stages: 4 each (the embedding and the head ride along with the first
  // and last; 20B's blocks dwarf them).
  auto r = axplan(with({"explain", "--grid", "1,4,1,1,8", "--pipeline-schedule", "1f1b"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("pipeline 1f1b: units per stage 4,4,4,4,4,4,4,4, checkpoint interval 1;"), std::string::npos)
      << r.out;
  // The passes of one micro-batch per stage: the middle six stages alike share a row,
  // in the format tools/gpu_step_compare.py reads ("busy (compute)" per pass, then the
  // optimizer).
  const std::regex row(R"((^|\n)0\s+[0-9.]+ \([0-9.]+\)\s+[0-9.]+ \([0-9.]+\)\s+[0-9.]+ \([0-9.]+\)\s+[0-9.]+\n)");
  EXPECT_TRUE(std::regex_search(r.out, row)) << r.out;
  EXPECT_NE(r.out.find("passes of one micro-batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n1-6 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n0 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n7 "), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0"}, kGpt20b)).out);
  int pipelines = 0;
  for (const auto& c : j["candidates"]) {
    if (c["ginter"] == 1) {
      EXPECT_FALSE(c.contains("stage_units"));
      continue;
    }
    ++pipelines;
    int units = 0;
    for (int u : c["stage_units"]) units += u;
    EXPECT_EQ(units, 32) << c.dump();
    EXPECT_EQ(c["stage_units"].size(), c["ginter"].get<size_t>());
    // Every stage but the first waits for its first activation, the first for its first
    // gradient: some idle time, never all of it.
    EXPECT_GT(c["bubble_fraction"].get<double>(), 0.0) << c.dump();
    EXPECT_LT(c["bubble_fraction"].get<double>(), 1.0) << c.dump();
  }
  EXPECT_GT(pipelines, 0);
}

TEST(Cli, CalibrateRunsTheSiblingProgramWithTheSameFlags) {
  std::ostringstream out, err;
  std::string program;
  std::vector<std::string> passed;
  auto fake = [&](const std::string& p, const std::vector<std::string>& args, std::ostream&) {
    program = p, passed = args;
    return 7;
  };
  const int rc = axonn::tools::run_axplan({"axplan", "calibrate", "--gpus-per-node", "2", "--help", "-o", "x.json"}, out,
                                          err, fake);
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(program, "axplan-calibrate");
  EXPECT_EQ(passed, (std::vector<std::string>{"--gpus-per-node", "2", "--help", "-o", "x.json"}));
  // In-process, without a program runner, calibrate is refused with a message.
  expect_usage_error(axplan({"calibrate", "--gpus-per-node", "2"}), "calibrate runs as its own program");
}

TEST(Cli, PlanRefusesWhatTheRuntimeCannotRunUnlessAsked) {
  const auto path = write_temp("bert_plan.json", "");
  const std::vector<std::string> bert = {"plan", "--model", "bert-large", "--gpus", "2", "--batch-seqs", "2",
                                         "--output", path};
  expect_usage_error(axplan(bert), "axrun runs GPT models");
  EXPECT_EQ(axplan(with(bert, {"--any-model"})).rc, 0);
  EXPECT_EQ(axonn::plan::load_plan(path).model.family, "explicit");
}

TEST(Cli, BenchTakesAThreadCount) {
  auto r = axplan({"bench", "--gpus", "64", "--model", "gpt-5b", "--repeat", "1", "--threads", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("candidates: 210 enumerated"), std::string::npos) << r.out;
}

// Every ranked candidate carries its mesh as a plan writes it (version 2): the axes in
// its placement order, innermost first, "sequence" right inside "data", and the sizes of
// its grid, whose product is the GPU count.
TEST(Cli, RankingJsonCarriesEachCandidatesMesh) {
  auto r = axplan(with({"rank", "--format", "json", "--top", "0", "--tensor-mode", "all", "--search-order"}, kGpt20b));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int with_sequence = 0, other_orders = 0;
  for (const auto& c : j["candidates"]) {
    ASSERT_TRUE(c.contains("mesh")) << c.dump();
    const int64_t sequence = c.value("sequence", int64_t{1});
    std::vector<std::string> want;
    std::stringstream order(c["placement_order"].get<std::string>());
    for (std::string axis; std::getline(order, axis, ',');) {
      if (axis == "data" && sequence > 1) want.push_back("sequence");
      want.push_back(axis);
    }
    const std::map<std::string, int64_t> size = {
        {"x", c["gx"]}, {"y", c["gy"]}, {"z", c["gz"]}, {"pipe", c["ginter"]},
        {"data", c["gdata"].get<int64_t>() / sequence}, {"sequence", sequence}};
    std::vector<std::string> got;
    int64_t product = 1;
    for (const auto& a : c["mesh"]) {
      got.push_back(a["name"]);
      EXPECT_EQ(a["size"].get<int64_t>(), size.at(a["name"])) << c.dump();
      product *= a["size"].get<int64_t>();
    }
    EXPECT_EQ(got, want) << c.dump();
    EXPECT_EQ(product, 32) << c.dump();
    with_sequence += sequence > 1;
    other_orders += c["placement_order"] != "x,y,z,data,pipe";
  }
  EXPECT_GT(with_sequence, 0);
  EXPECT_GT(other_orders, 0);
}

// --search-order shows each candidate's placement order in the table, JSON and CSV;
// the placement-agnostic model has none to search. --overlap-level plans and predicts
// with fewer overlaps: no candidate gets faster.
TEST(Cli, SearchOrderShowsEachCandidatesOrderAndOverlapLevelSlowsNothingDown) {
  const std::vector<std::string> bert = {"--model", "bert-large", "--topology", "summit", "--gpus", "12",
                                         "--batch-seqs", "96"};
  auto r = axplan(with({"rank", "--format", "json", "--top", "0", "--search-order"}, bert));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["candidates"][0]["placement_order"], "x,y,z,data,pipe");
  for (const auto& c : j["candidates"]) EXPECT_TRUE(c.contains("placement_order"));
  auto plain = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0"}, bert)).out);
  EXPECT_FALSE(plain["candidates"][0].contains("placement_order"));
  auto csv = axplan(with({"rank", "--format", "csv", "--top", "1", "--search-order"}, bert));
  EXPECT_NE(csv.out.find(",placement_order\n"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("\"x,y,z,data,pipe\"\n"), std::string::npos) << csv.out;
  auto table = axplan(with({"rank", "--top", "2", "--search-order"}, bert));
  EXPECT_NE(table.out.find("placement searched per grid, x,y,z,pipe,data first"), std::string::npos) << table.out;
  expect_usage_error(axplan(with({"rank", "--search-order", "--placement-agnostic"}, bert)),
                     "--search-order with --placement-agnostic");

  auto level0 = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0", "--overlap-level", "0"},
                                                  kGpt20b)).out);
  auto level4 = nlohmann::json::parse(axplan(with({"rank", "--format", "json", "--top", "0"}, kGpt20b)).out);
  auto key = [](const nlohmann::json& c) {
    return fmt::format("{},{},{},{},{}", c["gx"].get<int>(), c["gy"].get<int>(), c["gz"].get<int>(),
                       c["gdata"].get<int>(), c["ginter"].get<int>());
  };
  std::map<std::string, double> at4;
  for (const auto& c : level4["candidates"]) at4[key(c)] = c["batch_s"].get<double>();
  int slower = 0, compared = 0;
  for (const auto& c : level0["candidates"]) {
    if (!at4.count(key(c))) continue;  // fits only without the prefetch's second gathered block
    ++compared;
    EXPECT_GE(c["batch_s"].get<double>(), at4[key(c)]) << key(c);
    slower += c["batch_s"].get<double>() > at4[key(c)];
  }
  EXPECT_GT(slower, 0);
  EXPECT_EQ(compared, static_cast<int>(at4.size()));  // every grid of level 4 fits level 0 too
  expect_usage_error(axplan(with({"rank", "--overlap-level", "5"}, kGpt20b)), "--overlap-level");
}

// pool-calibrations: two files of one cluster pooled by median (two values: their mean),
// written loadable; files of two clusters refused with the file and the field.
TEST(Cli, PoolCalibrationsWritesTheMedianTopologyAndRefusesTwoClusters) {
  axonn::topo::Topology t = axonn::topo::load_topology("perlmutter");
  t.inter_node_bandwidth_bytes_per_s = 1e9;
  const std::string a = write_temp("pool_a.json", axonn::topo::topology_to_json(t).dump());
  t.inter_node_bandwidth_bytes_per_s = 3e9;
  const std::string b = write_temp("pool_b.json", axonn::topo::topology_to_json(t).dump());
  const std::string out = a + ".pooled.json";
  auto r = axplan({"pool-calibrations", a, b, "-o", out, "--name", "both"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("pooled 2 calibrations into"), std::string::npos) << r.out;
  const axonn::topo::Topology p = axonn::topo::load_topology(out);
  EXPECT_EQ(p.name, "both");
  EXPECT_DOUBLE_EQ(p.inter_node_bandwidth_bytes_per_s, 2e9);

  t.num_nodes *= 2;
  const std::string c = write_temp("pool_c.json", axonn::topo::topology_to_json(t).dump());
  r = axplan({"pool-calibrations", a, c, "-o", out});
  expect_usage_error(r, "pool_c.json: num_nodes");
  expect_usage_error(axplan({"pool-calibrations", a, "-o", out}), "At least 2 required");
}
