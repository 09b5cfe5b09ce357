// Checkpoints under real mpirun (part of runtime_mpi_tests: 1, 2, 4 and 8 ranks):
//
//  - 10 steps straight vs 5 steps, save, resume into a stage built from other weights,
//    5 steps: bitwise the same per-step losses and parameters, on every grid of the
//    world (pipelines included), with LibTorch's Adam; on the first two grids with data
//    parallelism with ZeRO-1 offloaded and ZeRO-3 too; in bf16 mixed precision on one grid;
//  - resumed on another grid (the next one of the world's, with ZeRO-2 where it has data
//    parallelism), the losses follow the straight run within 1e-5;
//  - the checkpoint -> serial state dict -> checkpoint round trip is lossless, the
//    serial weights are the stage's gathered ones, and resuming from the serial
//    checkpoint gives bitwise the state of resuming from the original;
//  - a damaged file is refused by its hash, a checkpoint without its completion marker
//    is never found, and only the newest `keep` checkpoints stay.
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
std::string scratch_dir(const std::string& what) {
  at::Tensor pid = at::full({1}, g_world->rank() == 0 ? static_cast<int64_t>(::getpid()) : 0, at::kLong);
  runtime::all_reduce_now(*g_world, pid, runtime::ReduceOp::Max);
  const std::string dir = fs::temp_directory_path() / ("axonn_ckpt_" + what + "_" + std::to_string(pid.item<int64_t>()));
  if (g_world->rank() == 0) {
    fs::remove_all(dir);
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
    runtime::save_checkpoint(root, step, {kSeed, plan::plan_to_json(p)}, *grid, stage->trainer.parameters(),
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
    // ZeRO on the first two grids with data parallelism (CI time: every grid takes 8 s on 8 ranks).
    if (plans[i].grid.gdata > 1 && sharded++ < 2) variants.insert(variants.end(), {{"zero1-offload", 1, true}, {"zero3", 3}});
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
      // Straight: 10 steps, saving after 5 (which must not disturb the run).
      TrainRun straight(p, cfg, kSeed);
      std::vector<double> losses;
      for (int64_t s = 0; s < 10; ++s) {
        losses.push_back(straight.step(*source, s));
        if (s == 4) straight.save(dir, 5, p);
      }
      // Resumed into a stage built from other weights.
      TrainRun again(p, cfg, kSeed + 100);
      again.resume(dir);
      for (int64_t s = 5; s < 10; ++s) EXPECT_EQ(again.step(*source, s), losses[static_cast<size_t>(s)]) << what << " step " << s;
      EXPECT_TRUE(same_state(again.stage->trainer.state(), straight.stage->trainer.state())) << what;
      ++resumed;
      // On the next grid of the world (ZeRO-2 where it has data parallelism).
      if (v.bf16 || plans.size() < 2) continue;
      plan::Plan q = plans[(i + 1) % plans.size()];
      if (q.grid.gdata > 1) q.optimizer.zero = 2;
      TrainRun other(q, cfg, kSeed + 200);
      other.resume(dir);
      for (int64_t s = 5; s < 10; ++s) {
        const double l = other.step(*source, s), ref = losses[static_cast<size_t>(s)];
        EXPECT_LE(std::abs(l - ref) / std::abs(ref), 1e-5) << what << " -> " << q.grid.to_string() << " step " << s;
      }
      ++resliced;
    }
  }
  EXPECT_GT(resumed, 0);
  if (g_world->rank() == 0) {
    std::cout << "[checkpoint] " << resumed << " resumed runs bitwise, " << resliced << " re-sliced onto another grid\n";
    fs::remove_all(root);
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
  // Resuming from the serial checkpoint is resuming from the original.
  TrainRun from_a(p, cfg, kSeed + 1), from_b(p, cfg, kSeed + 2);
  from_a.resume(root + "/a");
  from_b.resume(root + "/b");
  EXPECT_TRUE(same_state(from_a.stage->trainer.state(), from_b.stage->trainer.state()));
  EXPECT_TRUE(same_state(from_a.stage->trainer.state(), run.stage->trainer.state()));
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(root);
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
    fs::remove_all(root);
  }
  g_world->barrier();
}
