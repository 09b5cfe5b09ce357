// Model descriptions: the shipped zoo and the explicit format.
#include <gtest/gtest.h>

#include "axonn/common/data_path.hpp"
#include "axonn/model/model_description.hpp"
#include "test_util.hpp"

using namespace axonn;
using axonn::test::error_of;

TEST(Model, ShippedZooLoads) {
  auto names = list_data_names("model_zoo/models");
  for (const char* want : {"gpt-5b", "gpt-10b", "gpt-20b", "gpt-40b", "gpt-80b", "axonn-12b", "axonn-24b",
                           "axonn-50b", "axonn-100b", "bert-large", "gpt-125m"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& n : names) EXPECT_GT(model::load_model(n).parameters(), 0) << n;
}

TEST(Model, Gpt20bExpandsToPaperShapes) {
  auto m = model::load_model("gpt-20b");
  const int64_t H = 7168, V = 51200;
  EXPECT_EQ(m.layers.size(), 1u + 32 * 5 + 1);
  EXPECT_EQ(m.num_units, 32);
  // 32 blocks of 12 H^2 plus embedding and head of V*H each
  EXPECT_EQ(m.parameters(), 32 * 12 * H * H + 2 * V * H);
  const auto& qkv = m.layers[1];
  EXPECT_EQ(qkv.k, H);
  EXPECT_EQ(qkv.n, 3 * H);
  EXPECT_EQ(qkv.role, model::LinearRole::Column);
  EXPECT_FALSE(qkv.swaps_xy());
  EXPECT_EQ(m.layers[2].kind, model::LayerKind::Attention);
  EXPECT_EQ(m.layers[2].heads, 56);
  EXPECT_EQ(m.layers[3].role, model::LinearRole::Row);  // attention-out
  EXPECT_EQ(m.layers[4].n, 4 * H);               // FC1
  EXPECT_TRUE(m.layers[5].swaps_xy());           // FC2, row-parallel
  EXPECT_TRUE(m.layers[0].swaps_xy());           // the embedding: vocab rows over Y
  EXPECT_EQ(m.layers.back().n, V);               // LM head
  EXPECT_EQ(m.layers.back().role, model::LinearRole::Head);
  EXPECT_FALSE(m.layers.back().swaps_xy());
  EXPECT_FALSE(m.layers.back().in_block);
  EXPECT_EQ(m.layers.back().unit, 31);
}

TEST(Model, AxonnTableOneModels) {
  auto m = model::load_model("axonn-12b");
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.hidden, 4512);
  EXPECT_EQ(m.seq_len, 512);
  EXPECT_NEAR(static_cast<double>(m.parameters()), 12e9, 0.5e9);
  EXPECT_NEAR(static_cast<double>(model::load_model("axonn-100b").parameters()), 100e9, 2e9);
}

TEST(Model, BertLargeIsAnExplicitList) {
  auto m = model::load_model("bert-large");
  EXPECT_EQ(m.family, "explicit");
  EXPECT_EQ(m.num_units, 24);
  EXPECT_EQ(m.layers.size(), 1u + 24 * 5);
  EXPECT_EQ(m.layers[1].name, "encoder0.qkv");
  EXPECT_TRUE(m.layers[1].recomputed);
  EXPECT_EQ(m.layers.back().k, 4096);
  EXPECT_NEAR(static_cast<double>(m.parameters()), 334e6, 10e6);
}

TEST(Model, ExplicitRepeatsMakeUnits) {
  auto j = nlohmann::json::parse(R"({"name": "mlp", "family": "explicit", "seq_len": 8, "hidden": 16,
    "layers": [{"type": "linear", "k": 16, "n": 64, "repeat": 3},
               {"type": "linear", "k": 64, "n": 16, "transposed": true}]})");
  auto m = model::model_from_json(j, "mlp.json");
  EXPECT_EQ(m.num_units, 4);
  EXPECT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[2].unit, 2);
  EXPECT_EQ(m.layers[3].role, model::LinearRole::Row);  // the older "transposed": true
  // "role" names it; both at once is an error naming the field.
  j["layers"][1].erase("transposed");
  j["layers"][1]["role"] = "row";
  EXPECT_EQ(model::model_from_json(j, "mlp.json").layers[3].role, model::LinearRole::Row);
  j["layers"][1]["role"] = "head";
  EXPECT_EQ(model::model_from_json(j, "mlp.json").layers[3].role, model::LinearRole::Head);
  j["layers"][1]["transposed"] = true;
  EXPECT_NE(error_of([&] { model::model_from_json(j, "mlp.json"); }).find("mlp.json: /layers/1/transposed"),
            std::string::npos);
  j["layers"][1].erase("transposed");
  j["layers"][1]["role"] = "diagonal";
  EXPECT_NE(error_of([&] { model::model_from_json(j, "mlp.json"); }).find("/layers/1/role"), std::string::npos);
}

TEST(Model, BadInput) {
  auto gpt = nlohmann::json::parse(R"({"name": "g", "family": "gpt", "num_layers": 2, "hidden": 64,
    "heads": 4, "seq_len": 16, "vocab": 256})");
  auto j = gpt;
  j["hidden"] = 0;
  EXPECT_NE(error_of([&] { model::model_from_json(j, "g.json"); }).find("g.json: /hidden"), std::string::npos);
  j = gpt;
  j["heads"] = 5;
  EXPECT_NE(error_of([&] { model::model_from_json(j, "g.json"); }).find("not divisible by heads"), std::string::npos);
  j = gpt;
  j["family"] = "lstm";
  EXPECT_NE(error_of([&] { model::model_from_json(j, "g.json"); }).find("\"gpt\", \"explicit\""), std::string::npos);
  j = gpt;
  j["layers_count"] = 3;
  EXPECT_NE(error_of([&] { model::model_from_json(j, "g.json"); }).find("unknown field: g.json: /layers_count"),
            std::string::npos);
  auto ex = nlohmann::json::parse(R"({"name": "e", "family": "explicit", "seq_len": 8, "hidden": 16,
    "layers": [{"type": "block", "layers": [{"type": "block", "layers": []}]}]})");
  EXPECT_NE(error_of([&] { model::model_from_json(ex, "e.json"); }).find("nested"), std::string::npos);
  ex["layers"] = nlohmann::json::array({{{"type", "linear"}, {"k", -3}, {"n", 4}}});
  EXPECT_NE(error_of([&] { model::model_from_json(ex, "e.json"); }).find("e.json: /layers/0/k"), std::string::npos);
}
