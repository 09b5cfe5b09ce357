// A GPU's matmul model fitted to products timed on it (planner::fit_matmul_roofline,
// axplan matmul-shapes and fit-matmul; docs/validation.md, "Matrix products measured
// on a GPU").
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "axonn/common/data_path.hpp"
#include "axonn/common/json_reader.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/matmul_fit.hpp"
#include "axonn/topology/topology_io.hpp"
#include "axplan_cli.hpp"
#include "test_util.hpp"

using namespace axonn;
using axonn::test::error_of;
using axonn::test::write_temp;

namespace {

constexpr double kBandwidth = 3.35e12;  // bytes/s, an H100's HBM3

// The roofline of docs/model.md section 7 at `rate` and `overhead`, kBandwidth.
double roofline_s(const topo::MatmulTiming& t, double rate, double overhead) {
  const planner::MatmulShape s{t.m, t.k, t.n, t.batch};
  return overhead + std::max(s.flops() / rate, planner::matmul_bytes(s) / kBandwidth);
}

std::vector<topo::MatmulTiming> timed(std::vector<topo::MatmulTiming> shapes, double rate, double overhead) {
  for (auto& t : shapes) t.seconds = roofline_s(t, rate, overhead);
  return shapes;
}

// The fit of `measured` gives back 500 TFLOP/s and 10 us exactly, with `memory_bound`
// products on the memory side; returns how many refits it took.
size_t expect_exact_fit(const std::vector<topo::MatmulTiming>& measured, size_t memory_bound) {
  const planner::MatmulFit f = planner::fit_matmul_roofline(measured, kBandwidth);
  EXPECT_NEAR(f.rate_flops_per_s / 500e12, 1.0, 1e-9);
  EXPECT_NEAR(f.overhead_s, 10e-6, 1e-12);
  EXPECT_EQ(f.memory_bound, memory_bound);
  EXPECT_LT(f.mape, 1e-9);
  return f.refits;
}

int run_cli(std::vector<std::string> args, std::string* out_text, std::string* err_text) {
  args.insert(args.begin(), "axplan");
  std::ostringstream out, err;
  const int rc = tools::run_axplan(args, out, err);
  *out_text = out.str();
  *err_text = err.str();
  return rc;
}

}  // namespace

TEST(MatmulFit, RecoversRateAndOverheadOfComputeBoundProducts) {
  // Square and layer-like products, all compute-bound at 500 TFLOP/s and 3.35 TB/s.
  const auto measured = timed({{1024, 1024, 1024, 1, 0}, {2048, 4096, 1024, 1, 0}, {8192, 8192, 8192, 1, 0},
                               {2048, 12288, 49152, 1, 0}},
                              500e12, 10e-6);
  EXPECT_EQ(expect_exact_fit(measured, 0), 0u);
}

TEST(MatmulFit, MemoryBoundProductsTakeTheirBytesAndAFitOfTheRest) {
  // Attention's batched products with 64-wide heads: 2*48*2048*64*2048 = 25.8 GFLOP in
  // 2*48*(2048*64*2 + 2048^2) = 428 MB: 51.5 us of compute at 500 TFLOP/s, 128 us of
  // memory at 3.35 TB/s. They are memory-bound; the fit starts with them compute-bound
  // and must move them to the memory side to recover the model exactly.
  const auto measured = timed({{1024, 1024, 1024, 1, 0}, {4096, 4096, 4096, 1, 0}, {8192, 8192, 8192, 1, 0},
                               {2048, 64, 2048, 48, 0}, {2048, 2048, 64, 48, 0}},
                              500e12, 10e-6);
  const planner::MatmulShape scores{2048, 64, 2048, 48};
  EXPECT_GT(planner::matmul_bytes(scores) / kBandwidth, scores.flops() / 500e12);
  EXPECT_GE(expect_exact_fit(measured, 2), 1u);
  // Without a memory side the same times cannot be fitted exactly.
  EXPECT_GT(planner::fit_matmul_roofline(measured, 0).mape, 0.05);
}

TEST(MatmulFit, WeighsRelativeErrorsAndNeverFitsANegativeOverhead) {
  // Times that fall faster than FLOPs (large products relatively slower) would need a
  // negative overhead: the fit keeps 0 and fits the rate alone.
  std::vector<topo::MatmulTiming> measured = timed({{1024, 1024, 1024, 1, 0}, {8192, 8192, 8192, 1, 0}}, 500e12, 0);
  measured[1].seconds *= 1.2;
  const planner::MatmulFit f = planner::fit_matmul_roofline(measured, kBandwidth);
  EXPECT_EQ(f.overhead_s, 0.0);
  // Least squares of the relative errors (r/x - 1) with x = 1/rate over ratios 1 and
  // 1/1.2: x = (1 + 1/1.2) / (1 + 1/1.44) in units of the true time per FLOP.
  EXPECT_NEAR(500e12 / f.rate_flops_per_s, (1 + 1 / 1.2) / (1 + 1 / 1.44), 1e-9);
}

TEST(MatmulFit, RefusesWhatCannotBeFitted) {
  const auto one = timed({{1024, 1024, 1024, 1, 0}}, 500e12, 10e-6);
  EXPECT_NE(error_of([&] { planner::fit_matmul_roofline(one, kBandwidth); }).find("at least two compute-bound"),
            std::string::npos);
  const auto same_flops = timed({{1024, 2048, 1024, 1, 0}, {2048, 1024, 1024, 1, 0}}, 500e12, 10e-6);
  EXPECT_NE(error_of([&] { planner::fit_matmul_roofline(same_flops, kBandwidth); }).find("different FLOPs"),
            std::string::npos);
  auto zero_time = timed({{1024, 1024, 1024, 1, 0}, {4096, 4096, 4096, 1, 0}}, 500e12, 10e-6);
  zero_time[0].seconds = 0;
  EXPECT_NE(error_of([&] { planner::fit_matmul_roofline(zero_time, kBandwidth); }).find("time > 0"), std::string::npos);
  EXPECT_NE(error_of([&] { planner::fit_matmul_roofline(timed({{1024, 1024, 1024, 1, 0}, {4096, 4096, 4096, 1, 0}},
                                                                500e12, 10e-6),
                                                          -1.0); })
                .find("bandwidth"),
            std::string::npos);
  // Larger products taking less time: no positive rate.
  std::vector<topo::MatmulTiming> shrinking = {{1024, 1024, 1024, 1, 1e-3}, {8192, 8192, 8192, 1, 1e-6}};
  EXPECT_NE(error_of([&] { planner::fit_matmul_roofline(shrinking, 0); }).find("grow with FLOPs"), std::string::npos);
}

TEST(FitMatmulCli, ShapesThenTimingsOfAKnownModelGiveThatModelBack) {
  std::string out, err;
  const std::string shapes = test::scratch_dir() / "shapes.json";
  ASSERT_EQ(run_cli({"matmul-shapes", "--runs", "megatron-lm-2021", "--model", "gpt-tiny", "--model", "gpt-bench",
                     "--gpus", "1,4", "--batch-seqs", "8", "--out", shapes},
                    &out, &err),
            0)
      << err;
  const nlohmann::json doc = read_json_file("test", shapes);
  ASSERT_EQ(doc.at("format"), "axonn-matmul-shapes");
  std::map<std::string, int> per_group;
  nlohmann::json timings = nlohmann::json::array();
  for (const auto& s : doc.at("shapes")) {
    ++per_group[s.at("group").get<std::string>()];
    const topo::MatmulTiming t{s.at("m"), s.at("k"), s.at("n"), s.at("batch"), 0};
    timings.push_back({{"m", t.m}, {"k", t.k}, {"n", t.n}, {"batch", t.batch}, {"group", s.at("group")},
                       {"seconds", roofline_s(t, 600e12, 5e-6)}, {"spread", 0.01}});
  }
  EXPECT_EQ(per_group.size(), 12u);  // the 10 published runs and the two models
  EXPECT_GT(per_group["zoo:gpt-tiny"], 3);
  EXPECT_GT(per_group["megatron-lm-2021:gpt-145.6b"], 3);
  const nlohmann::json t = {{"format", "axonn-matmul-timings"}, {"version", 1},       {"device", "synthetic"},
                            {"software", "none"},               {"dtype", "bf16"},    {"method", "the roofline"},
                            {"timings", timings}};
  const std::string timings_path = write_temp("timings.json", t.dump());
  const std::string fitted = test::scratch_dir() / "fitted.json";
  ASSERT_EQ(run_cli({"fit-matmul", "--timings", timings_path, "--topology", "dgx-h100", "--fit-groups",
                     "megatron-lm-2021:gpt-145.6b", "--out", fitted},
                    &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("held out 0.0%"), std::string::npos) << out;
  const topo::Topology got = topo::load_topology(fitted);
  // (Fitted on a published run's products: gpt-tiny's are all memory-bound at 3.35 TB/s.)
  EXPECT_NEAR(got.compute.matmul_flops_per_s / 600e12, 1.0, 1e-9);
  EXPECT_NEAR(got.compute.matmul_overhead_s, 5e-6, 1e-12);
  EXPECT_EQ(got.compute.memory_bytes_per_s, kBandwidth);
  EXPECT_TRUE(got.compute.matmul_table.empty());
  // dgx-h100 carries timed element-wise costs; without --with-elementwise they are dropped.
  ASSERT_FALSE(topo::load_topology("dgx-h100").compute.elementwise.empty());
  EXPECT_TRUE(got.compute.elementwise.empty());

  // Bad input names the file and the field, exit code 2.
  nlohmann::json bad = t;
  bad["timings"][0].erase("seconds");
  const std::string bad_path = write_temp("bad-timings.json", bad.dump());
  EXPECT_EQ(run_cli({"fit-matmul", "--timings", bad_path}, &out, &err), 2);
  EXPECT_NE(err.find("bad-timings.json"), std::string::npos) << err;
  EXPECT_NE(err.find("/timings/0/seconds"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"fit-matmul", "--timings", timings_path, "--fit-groups", "zoo:nothing"}, &out, &err), 2);
  EXPECT_NE(err.find("zoo:nothing"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"matmul-shapes"}, &out, &err), 2);
  EXPECT_NE(err.find("--runs and/or --model"), std::string::npos) << err;
  // Adam and the gradient accumulation have no backward: a timed one is refused, not
  // written into a topology that the reader would refuse.
  for (const char* op : {"adam", "grad_accumulate"}) {
    nlohmann::json ew = t;
    ew["elementwise"] = {{{"op", op}, {"elements", 1024}, {"forward_s", 1e-6}, {"backward_s", 1e-6}}};
    EXPECT_EQ(run_cli({"fit-matmul", "--timings", write_temp("ew-timings.json", ew.dump())}, &out, &err), 2) << op;
    EXPECT_NE(err.find("ew-timings.json"), std::string::npos) << err;
    EXPECT_NE(err.find("/elementwise/0/backward_s"), std::string::npos) << err;
    EXPECT_NE(err.find(std::string(op) + " has no backward"), std::string::npos) << err;
  }
  // A group whose products are all memory-bound cannot give a rate: the error names
  // the timings file and the groups.
  EXPECT_EQ(run_cli({"fit-matmul", "--timings", timings_path, "--fit-groups", "zoo:gpt-tiny"}, &out, &err), 2);
  EXPECT_NE(err.find("timings.json (--fit-groups zoo:gpt-tiny"), std::string::npos) << err;
  EXPECT_NE(err.find("compute-bound"), std::string::npos) << err;
  // A runs file whose micro-batch is the planner's rule has no products to list.
  nlohmann::json runs = read_json_file("test", resolve_data_file("test", "model_zoo/published", "megatron-lm-2021"));
  runs["settings"]["microbatch_seqs"] = 0;
  EXPECT_EQ(run_cli({"matmul-shapes", "--runs", write_temp("mb0-runs.json", runs.dump())}, &out, &err), 2);
  EXPECT_NE(err.find("mb0-runs.json: /settings/microbatch_seqs"), std::string::npos) << err;
}

TEST(FitMatmulCli, ShippedDgxH100HoldsTheFitOfItsMeasuredProducts) {
  // topology/clusters/dgx-h100.json's matmul model is the fit over every product timed
  // on an H100, and its element-wise costs those timed in the same run
  // (docs/validation/h100-matmul-timings-2026-11-27-run1.json).
  const std::string timings =
      resolve_data_file("test", "docs/validation", "h100-matmul-timings-2026-11-27-run1");
  const std::string fitted = test::scratch_dir() / "h100.json";
  std::string out, err;
  ASSERT_EQ(run_cli({"fit-matmul", "--timings", timings, "--topology", "dgx-h100", "--with-elementwise", "--out",
                     fitted},
                    &out, &err),
            0)
      << err;
  const topo::Topology refit = topo::load_topology(fitted), shipped = topo::load_topology("dgx-h100");
  EXPECT_NEAR(shipped.compute.matmul_flops_per_s / refit.compute.matmul_flops_per_s, 1.0, 1e-9);
  EXPECT_NEAR(shipped.compute.matmul_overhead_s, refit.compute.matmul_overhead_s, 1e-12);
  // Every operation run 1 timed (all but grad_accumulate, layer_norm_split and
  // attention_layout, which it predates: dgx-h100 charges those their roofline bytes).
  ASSERT_EQ(shipped.compute.elementwise.size(), topo::elementwise_op_names().size() - 3);
  EXPECT_EQ(shipped.compute.elementwise.count("grad_accumulate"), 0u);
  EXPECT_EQ(shipped.compute.elementwise.count("layer_norm_split"), 0u);
  EXPECT_EQ(shipped.compute.elementwise.count("attention_layout"), 0u);
  EXPECT_EQ(refit.compute.elementwise.size(), shipped.compute.elementwise.size());
  for (const auto& [op, cost] : shipped.compute.elementwise) {
    EXPECT_NEAR(cost.forward_s_per_element / refit.compute.elementwise.at(op).forward_s_per_element, 1.0, 1e-9) << op;
    EXPECT_NEAR(cost.backward_s_per_element, refit.compute.elementwise.at(op).backward_s_per_element, 1e-18) << op;
  }
  EXPECT_NE(out.find("1310 products timed on NVIDIA H100 80GB HBM3"), std::string::npos) << out;
}
