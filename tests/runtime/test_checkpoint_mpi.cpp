// Checkpoints under real mpirun (part of runtime_mpi_tests: 1, 2, 4 and 8 ranks):
//
//  - 6 steps straight vs 3 steps, save, resume into a stage built from other weights,
//    3 steps: bitwise the same per-step losses and parameters, on every grid of the
//    world (pipelines included), with LibTorch's Adam; on the first two grids with data
//    parallelism with ZeRO-1 offloaded and ZeRO-3 too (the first one on 8 ranks); in
//    bf16 mixed precision on one grid;
//  - resumed on another grid (the next one of the world's, with ZeRO-2 where it has data
//    parallelism; on 8 ranks from every third grid), the losses follow the straight run
//    within 1e-5;
//  - the checkpoint -> serial state dict -> checkpoint round trip is lossless, the
//    serial weights are the stage's gathered ones, and resuming from the serial
//    checkpoint gives bitwise the state of resuming from the original;
//  - L2L: resumed bitwise on the same ranks, and its checkpoint re-sliced onto six 4D
//    grids of the world follows the straight L2L run within 1e-5;
//  - a damaged file is refused by its hash, a checkpoint without its completion marker
//    is never found, and only the newest `keep` checkpoints stay;
//  - sharded initialization: shard_positions is shard_of of the positions for every
//    parameter at every coordinate of every grid of 8 ranks, the seeded weights are
//    N(0, 0.02), and a stage built from the seed alone holds bitwise the shards of the
//    serial model of that seed on every grid of the world.
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "axonn/common/remove_tree.hpp"
#include "axonn/gpt/gpt_l2l.hpp"
#include "axonn/runtime/checkpoint.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;
namespace fs = std::filesystem;

namespace {

model::ModelDescription checkpoint_gpt() {
  return model::model_from_json(nlohmann::json::parse(R"({"name": "gpt-ckpt", "family": "gpt", "hidden": 32,
      "heads": 4, "num_layers": 4, "seq_len": 8, "vocab": 64, "ffn_multiplier": 2})"),
                                "checkpoint_gpt");
}

constexpr int64_t kSeqs = 16;
constexpr uint64_t kSeed = 31;

// world_plans under 1F1B (ZeRO-3 needs one step program per replica).
std::vector<plan::Plan> checkpoint_plans(const model::ModelDescription& desc) {
  std::vector<plan::Plan> out = world_plans(desc, kSeqs);
  for (plan::Plan& p : out) p.pipeline.schedule = plan::PipelineSchedule::OneFOneB;
  return out;
}

// A directory every rank agrees on (rank 0's pid), emptied.
void remove_scratch(const std::string& dir) {
  std::error_code ec;
  remove_tree(dir, ec);
  EXPECT_FALSE(ec) << dir << ": " << ec.message();
}

std::string scratch_dir(const std::string& what) {
  at::Tensor pid = at::full({1}, g_world->rank() == 0 ? static_cast<int64_t>(::getpid()) : 0, at::kLong);
  runtime::all_reduce_now(*g_world, pid, runtime::ReduceOp::Max);
  const std::string dir = fs::temp_directory_path() / ("axonn_ckpt_" + what + "_" + std::to_string(pid.item<int64_t>()));
  if (g_world->rank() == 0) {
    remove_scratch(dir);
    fs::create_directories(dir);
  }
  g_world->barrier();
  return dir;
}

struct TrainRun {
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<gpt::GptStage> stage;
  TrainRun(const plan::Plan& p, const gpt::GptConfig& cfg, uint64_t weight_seed) {
    grid = std::make_unique<ProcessGrid>(*g_world, p.grid, p.placement_order);
    gpt::SerialGpt init(cfg, weight_seed);
    stage = std::make_unique<gpt::GptStage>(p, *grid, cfg, init.named_parameters(), nullptr,
                                            runtime::TrainerOptions{1e-2, 1.0});
  }
  topo::Coords coords() const { return grid->layout().coords_of(g_world->rank()); }
  double step(runtime::TokenSource& source, int64_t s) { return stage->trainer.step(source.batch(s)).loss; }
  void save(const std::string& root, int64_t step, const plan::Plan& p, int64_t keep = 2) {
    runtime::SaveOptions o;
    o.keep = keep;
    runtime::save_checkpoint(root, step, {kSeed, plan::plan_to_json(p), "synthetic"}, *grid, stage->trainer.parameters(),
                             stage->trainer.state(), o);
  }
  void resume(const std::string& path) {
    const auto m = runtime::read_manifest(runtime::find_checkpoint(path));
    stage->trainer.load_state(runtime::load_checkpoint(m, grid->grid(), coords(), stage->trainer.parameters()));
  }
};

bool same_state(const runtime::TrainingState& a, const runtime::TrainingState& b) {
  if (a.adam_steps != b.adam_steps || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const auto& x = a.params[i];
    const auto& y = b.params[i];
    if (!x.weight.equal(y.weight) || !x.exp_avg.equal(y.exp_avg) || !x.exp_avg_sq.equal(y.exp_avg_sq) ||
        x.master.defined() != y.master.defined() || (x.master.defined() && !x.master.equal(y.master)))
      return false;
  }
  return true;
}

struct Variant {
  std::string name;
  int64_t zero = 0;
  bool offload = false;
  bool bf16 = false;
};

}  // namespace

TEST(Checkpoint, ResumeIsBitwiseTheStraightRunAndReslicesToAnotherGrid) {
  const auto desc = checkpoint_gpt();
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  auto source = runtime::make_token_source("", cfg.vocab, kSeqs, cfg.seq_len, kSeed);
  const auto plans = checkpoint_plans(desc);
  ASSERT_FALSE(plans.empty());
  const std::string root = scratch_dir("resume");
  int resumed = 0, resliced = 0, sharded = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    std::vector<Variant> variants{{"adam"}};
    // ZeRO on the first two grids with data parallelism (one on 8 ranks: CI time).
    if (plans[i].grid.gdata > 1 && sharded++ < (g_world->size() >= 8 ? 1 : 2))
      variants.insert(variants.end(), {{"zero1-offload", 1, true}, {"zero3", 3}});
    if (i == 0) variants.push_back({"bf16", 0, false, true});
    for (const Variant& v : variants) {
      plan::Plan p = plans[i];
      p.optimizer.zero = v.zero;
      p.optimizer.offload = v.offload;
      p.optimizer.bucket_elements = 700;
      if (v.bf16) p.precision = plan::Precision::bf16();
      cfg.dtype = v.bf16 ? at::kBFloat16 : at::kFloat;
      const std::string what = p.grid.to_string() + " " + v.name;
      const std::string dir = root + "/" + std::to_string(i) + v.name;
      // Straight: 6 steps, saving after 3 (which must not disturb the run; the 3 steps
      // after it read back Adam's moments and step count).
      constexpr int64_t kSaved = 3, kSteps = 6;
      TrainRun straight(p, cfg, kSeed);
      std::vector<double> losses;
      for (int64_t s = 0; s < kSteps; ++s) {
        losses.push_back(straight.step(*source, s));
        if (s == kSaved - 1) straight.save(dir, kSaved, p);
      }
      // Resumed into a stage built from other weights.
      TrainRun again(p, cfg, kSeed + 100);
      again.resume(dir);
      for (int64_t s = kSaved; s < kSteps; ++s)
        EXPECT_EQ(again.step(*source, s), losses[static_cast<size_t>(s)]) << what << " step " << s;
      EXPECT_TRUE(same_state(again.stage->trainer.state(), straight.stage->trainer.state())) << what;
      ++resumed;
      // On the next grid of the world (ZeRO-2 where it has data parallelism); on 8 ranks
      // from every third grid (CI time).
      if (v.bf16 || plans.size() < 2 || (g_world->size() >= 8 && i % 3 != 0)) continue;
      plan::Plan q = plans[(i + 1) % plans.size()];
      if (q.grid.gdata > 1) q.optimizer.zero = 2;
      TrainRun other(q, cfg, kSeed + 200);
      other.resume(dir);
      for (int64_t s = kSaved; s < kSteps; ++s) {
        const double l = other.step(*source, s), ref = losses[static_cast<size_t>(s)];
        EXPECT_LE(std::abs(l - ref) / std::abs(ref), 1e-5) << what << " -> " << q.grid.to_string() << " step " << s;
      }
      ++resliced;
    }
  }
  EXPECT_GT(resumed, 0);
  if (g_world->rank() == 0) {
    std::cout << "[checkpoint] " << resumed << " resumed runs bitwise, " << resliced << " re-sliced onto another grid\n";
    remove_scratch(root);
  }
}

TEST(Checkpoint, SerialStateDictRoundTripIsLossless) {
  const auto desc = checkpoint_gpt();
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  auto source = runtime::make_token_source("", cfg.vocab, kSeqs, cfg.seq_len, kSeed);
  const auto plans = checkpoint_plans(desc);
  plan::Plan p = plans.back();  // the most pipelined of the world's grids
  if (p.grid.gdata > 1) p.optimizer.zero = 1;
  const std::string root = scratch_dir("serial");
  TrainRun run(p, cfg, kSeed);
  for (int64_t s = 0; s < 2; ++s) run.step(*source, s);
  run.save(root + "/a", 2, p);
  const std::string serial = root + "/state.pt", serial2 = root + "/state2.pt";
  if (g_world->rank() == 0) {
    runtime::write_serial_state(runtime::read_manifest(runtime::find_checkpoint(root + "/a")), serial);
    runtime::checkpoint_from_serial(serial, root + "/b");
    runtime::write_serial_state(runtime::read_manifest(runtime::find_checkpoint(root + "/b")), serial2);
  }
  g_world->barrier();
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return torch::pickle_load(std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()))
        .toGenericDict();
  };
  const auto one = read(serial), two = read(serial2);
  ASSERT_EQ(one.size(), two.size());
  for (const auto& kv : one) {
    ASSERT_TRUE(two.contains(kv.key())) << kv.key().toStringRef();
    EXPECT_TRUE(kv.value().toTensor().equal(two.at(kv.key()).toTensor())) << kv.key().toStringRef();
  }
  // The serial weights are the stage's, whole.
  for (const auto& [name, full] : run.stage->model.gather(false))
    EXPECT_TRUE(one.at(name).toTensor().equal(full)) << name;
  EXPECT_EQ(one.at("axonn.step").toTensor().item<int64_t>(), 2);
  // The data's identity survives the round trip (a resume on other data is refused).
  EXPECT_EQ(runtime::read_manifest(runtime::find_checkpoint(root + "/b")).data, "synthetic");
  // Resuming from the serial checkpoint is resuming from the original.
  TrainRun from_a(p, cfg, kSeed + 1), from_b(p, cfg, kSeed + 2);
  from_a.resume(root + "/a");
  from_b.resume(root + "/b");
  EXPECT_TRUE(same_state(from_a.stage->trainer.state(), from_b.stage->trainer.state()));
  EXPECT_TRUE(same_state(from_a.stage->trainer.state(), run.stage->trainer.state()));
  g_world->barrier();
  if (g_world->rank() == 0) remove_scratch(root);
}

TEST(Checkpoint, DamagedOrIncompleteCheckpointsAreNeverLoaded) {
  const auto desc = checkpoint_gpt();
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  auto source = runtime::make_token_source("", cfg.vocab, kSeqs, cfg.seq_len, kSeed);
  const plan::Plan p = checkpoint_plans(desc).front();
  const std::string root = scratch_dir("damaged");
  TrainRun run(p, cfg, kSeed);
  for (int64_t s = 0; s < 4; ++s) {
    run.step(*source, s);
    run.save(root, s + 1, p, /*keep=*/2);
  }
  if (g_world->rank() == 0) {
    // The newest two stay.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"step-00000003", "step-00000004"}));
    // Without its marker, step 4 is not found; the directory itself is refused.
    fs::remove(fs::path(root) / "step-00000004" / "COMPLETE");
    EXPECT_EQ(runtime::find_checkpoint(root), runtime::checkpoint_dir(root, 3));
    EXPECT_THROW(runtime::find_checkpoint(runtime::checkpoint_dir(root, 4)), InputError);
    // One flipped byte: refused by the hash, naming the file.
    const auto m = runtime::read_manifest(runtime::checkpoint_dir(root, 3));
    const fs::path victim = fs::path(m.dir) / m.files.front().file;
    {
      std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
      char c = 0;
      f.read(&c, 1);
      f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
      c = static_cast<char>(c ^ 0x40);
      f.write(&c, 1);
    }
    try {
      runtime::load_checkpoint(m, p.grid, m.files.front().coords, run.stage->trainer.parameters());
      ADD_FAILURE() << "a damaged file was loaded";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("FNV-1a"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(victim.string()), std::string::npos) << e.what();
    }
    remove_scratch(root);
  }
  g_world->barrier();
}

TEST(Checkpoint, L2LResumesBitwiseAndItsCheckpointReslicesTo4DGrids) {
  const auto desc = checkpoint_gpt();
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  auto source = runtime::make_token_source("", cfg.vocab, kSeqs, cfg.seq_len, kSeed);
  if (kSeqs % g_world->size() != 0) GTEST_SKIP() << "no L2L plan divides the batch";
  const topo::Grid g{1, 1, 1, g_world->size(), 1};
  plan::Plan p = test_plan(desc, g, kSeqs, kSeqs / g.gdata / 2);  // u = 2
  p.strategy = plan::Strategy::L2L;
  const std::string root = scratch_dir("l2l");
  const runtime::TrainerOptions options{1e-2, 1.0};
  ProcessGrid grid(*g_world, p.grid, p.placement_order);
  auto build = [&](uint64_t seed) { return std::make_unique<gpt::GptL2L>(p, grid, cfg, gpt::InitialWeights::seeded(seed), options); };
  auto straight = build(kSeed);
  std::vector<double> losses;
  for (int64_t s = 0; s < 6; ++s) {
    losses.push_back(straight->trainer.step(source->batch(s)).loss);
    if (s == 2)
      runtime::save_checkpoint(root, 3, {kSeed, plan::plan_to_json(p), "synthetic"}, grid, straight->trainer.parameters(),
                               straight->trainer.state());
  }
  const auto m = runtime::read_manifest(runtime::find_checkpoint(root));
  auto again = build(kSeed + 100);
  again->trainer.load_state(
      runtime::load_checkpoint(m, grid.grid(), grid.layout().coords_of(g_world->rank()), again->trainer.parameters()));
  for (int64_t s = 3; s < 6; ++s) EXPECT_EQ(again->trainer.step(source->batch(s)).loss, losses[static_cast<size_t>(s)]) << s;
  EXPECT_TRUE(same_state(again->trainer.state(), straight->trainer.state()));
  // Onto 4D grids of the world: six of them spread over the list, the last (the most
  // pipelined) included (CI time).
  int resliced = 0;
  const auto plans = checkpoint_plans(desc);
  const size_t stride = std::max<size_t>(1, plans.size() / 6);
  for (size_t i = plans.size() - 1; i < plans.size(); i = i >= stride ? i - stride : plans.size()) {
    const plan::Plan& q = plans[i];
    TrainRun other(q, cfg, kSeed + 200);
    other.resume(root);
    for (int64_t s = 3; s < 6; ++s) {
      const double l = other.step(*source, s), ref = losses[static_cast<size_t>(s)];
      EXPECT_LE(std::abs(l - ref) / std::abs(ref), 1e-5) << q.grid.to_string() << " step " << s;
    }
    ++resliced;
  }
  EXPECT_GT(resliced, 0);
  g_world->barrier();
  if (g_world->rank() == 0) remove_scratch(root);
}

TEST(ShardedInit, ShardPositionsAreShardOfThePositionsOnEveryGridOfEight) {
  gpt::GptConfig cfg = gpt::GptConfig::from(checkpoint_gpt());
  int checked = 0;
  for (const auto& g : planner::enumerate_grids(8)) {
    if (cfg.hidden % (g.gx * g.gy) != 0 || cfg.heads % g.gy != 0) continue;
    const topo::RankLayout layout(g, topo::default_order());
    for (int64_t r = 0; r < g.total(); ++r) {
      const topo::Coords c = layout.coords_of(r);
      for (const auto& l : gpt::parameter_layout(cfg)) {
        int64_t n = 1;
        for (int64_t d : l.shape) n *= d;
        if ((l.shape.size() == 2 && (l.shape[0] * l.shape[1]) % (g.gx * g.gy * g.gz) != 0)) continue;
        const at::Tensor expected = runtime::shard_of(at::arange(n, at::kLong).view(l.shape), l.spec, g, c);
        const at::Tensor got = runtime::shard_positions(l.spec, l.shape, g, c);
        ASSERT_TRUE(got.equal(expected)) << l.name << " " << g.to_string() << " rank " << r;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(ShardedInit, SeededWeightsAreNormalWithTheSerialModelsStd) {
  const gpt::ParameterLayout l{"block0.fc1.weight", {256, 1024}, runtime::ShardSpec::matrix(model::LinearRole::Column)};
  const at::Tensor w = gpt::initial_values(l, at::arange(256 * 1024, at::kLong).view({256, 1024}), 3, at::kFloat);
  EXPECT_LT(std::abs(w.mean().item<double>()), 2e-4);
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.0004);
  EXPECT_NEAR(w.abs().max().item<double>(), 0.02 * 4.8, 0.02 * 1.0);  // ~4.8 sigma for 2^18 samples
  // Another seed or another name: other values.
  const at::Tensor other = gpt::initial_values(l, at::arange(256 * 1024, at::kLong).view({256, 1024}), 4, at::kFloat);
  EXPECT_FALSE(w.equal(other));
  EXPECT_LT(std::abs((w * other).mean().item<double>()), 4e-6);  // uncorrelated (5 standard errors)
}

TEST(ShardedInit, AStageFromTheSeedHoldsTheSerialModelsShardsOnEveryGrid) {
  const auto desc = checkpoint_gpt();
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  gpt::SerialGpt serial(cfg, kSeed);
  int compared = 0;
  for (const plan::Plan& p : checkpoint_plans(desc)) {
    ProcessGrid grid(*g_world, p.grid, p.placement_order);
    gpt::GptStage from_serial(p, grid, cfg, serial.named_parameters(), nullptr);
    gpt::GptStage from_seed(p, grid, cfg, gpt::InitialWeights::seeded(kSeed), nullptr);
    const auto& a = from_serial.trainer.parameters();
    const auto& b = from_seed.trainer.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_TRUE(a[i].tensor.equal(b[i].tensor)) << a[i].name << " " << p.grid.to_string();
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}
