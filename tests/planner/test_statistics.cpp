// Validation statistics and the latency/bandwidth fit against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "axonn/planner/bandwidth_fit.hpp"
#include "axonn/planner/statistics.hpp"
#include "test_util.hpp"

using namespace axonn::planner;

TEST(Statistics, RankCorrelations) {
  // ranks (1,2,3) vs (1,3,2): rho = 1 - 6*2/(3*8) = 0.5; tau = (2 - 1)/3
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3}, {10, 30, 20}), 0.5);
  EXPECT_NEAR(kendall_tau_b({1, 2, 3}, {10, 30, 20}), 1.0 / 3.0, 1e-15);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {5, 6, 7, 8}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3, 4}, {8, 7, 6, 5}), -1.0);
}

TEST(Statistics, TiesGetAverageRanksAndTauB) {
  EXPECT_EQ(average_ranks({1, 1, 2}), (std::vector<double>{1.5, 1.5, 3}));
  // ranks (1.5, 1.5, 3) vs (1, 2, 3): 1.5 / sqrt(1.5 * 2)
  EXPECT_NEAR(spearman({1, 1, 2}, {1, 2, 3}), 1.5 / std::sqrt(3.0), 1e-15);
  // 2 concordant, 1 pair tied in x: 2 / sqrt((3 - 1) * 3)
  EXPECT_NEAR(kendall_tau_b({1, 1, 2}, {1, 2, 3}), 2.0 / std::sqrt(6.0), 1e-15);
}

TEST(Statistics, ErrorsAndTopK) {
  EXPECT_DOUBLE_EQ(mape({110, 90}, {100, 100}), 0.1);
  EXPECT_DOUBLE_EQ(top_k_overlap({1, 2, 3, 4}, {1, 3, 2, 4}, 2), 0.5);
  EXPECT_DOUBLE_EQ(top_k_overlap({1, 2, 3, 4}, {1, 3, 2, 4}, 3), 1.0);
  EXPECT_EQ(predicted_rank_of_measured_best({3, 1, 2}, {1, 2, 3}), 3u);
  EXPECT_EQ(predicted_rank_of_measured_best({1, 2, 3}, {1, 2, 3}), 1u);
}

TEST(BandwidthFit, RecoversLatencyAndBandwidth) {
  // t = 1 ms per step + bytes / 1 GB/s
  std::vector<CollectiveSample> s = {{1, 1e6, 2e-3}, {1, 4e6, 5e-3}, {3, 2e6, 5e-3}};
  auto f = fit_latency_bandwidth(s);
  EXPECT_NEAR(f.alpha_s, 1e-3, 1e-12);
  EXPECT_NEAR(f.beta_bytes_per_s, 1e9, 1e-3);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_NEAR(f.max_relative_error, 0.0, 1e-9);
  // ring terms: an all-reduce of 4 MB over 4 GPUs moves 2 * 3/4 * 4 MB in 6 steps
  auto ar = all_reduce_sample(4, 4e6, 0.01);
  EXPECT_DOUBLE_EQ(ar.steps, 6);
  EXPECT_DOUBLE_EQ(ar.bytes_moved, 6e6);
  EXPECT_DOUBLE_EQ(all_gather_sample(4, 4e6, 0.01).bytes_moved, 3e6);
}

TEST(BandwidthFit, ARefusalNamesTheFitAndTheQuantityItsTimesShouldGrowWith) {
  // Waits that shrink as the compute before them grows (t = 3 - c): no fit. Calibrate
  // prints the refusal beside a sync-wait round, where "message size" would mislead.
  const std::vector<CollectiveSample> shrinking{{1, 1, 2}, {1, 2, 1}};
  const std::string wait = axonn::test::error_of([&] { fit_latency_bandwidth(shrinking, kSyncWaitFit); });
  EXPECT_NE(wait.find("sync-wait fit"), std::string::npos) << wait;
  EXPECT_NE(wait.find("times that grow with compute since the last collective"), std::string::npos) << wait;
  EXPECT_EQ(wait.find("message size"), std::string::npos) << wait;
  const std::string matmul = axonn::test::error_of([] { fit_latency_bandwidth({{1, 1e9, 1e-3}}, kMatmulFit); });
  EXPECT_NE(matmul.find("too few distinct values of FLOPs"), std::string::npos) << matmul;
  EXPECT_NE(matmul.find("matmul fit"), std::string::npos) << matmul;
  // Collectives keep the default wording.
  EXPECT_NE(axonn::test::error_of([&] { fit_latency_bandwidth(shrinking); }).find("times that grow with message size"),
            std::string::npos);
}

TEST(BandwidthFit, ClampsNegativeLatencyAndRefusesTooLittleData) {
  // The free fit gives alpha = -0.2 ms; with alpha = 0, 1/beta = sum(b t) / sum(b^2) = 9.8e-10
  auto f = fit_latency_bandwidth({{1, 1e6, 0.9e-3}, {1, 2e6, 2e-3}});
  EXPECT_EQ(f.alpha_s, 0.0);
  EXPECT_NEAR(f.beta_bytes_per_s, 1.0 / 9.8e-10, 1.0);
  EXPECT_NE(axonn::test::error_of([] { fit_latency_bandwidth({{1, 1e6, 1e-3}}); }).find("too few"), std::string::npos);
  EXPECT_NE(axonn::test::error_of([] { fit_latency_bandwidth({{1, 1e6, 1e-3}, {2, 1e6, 2e-3}}); }).find("too few"),
            std::string::npos);
}
