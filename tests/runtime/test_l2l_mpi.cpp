// L2L (runtime/l2l_trainer.hpp) against serial LibTorch under real mpirun (part of
// runtime_mpi_tests: 1, 2, 4 and 8 ranks, every rank a data-parallel replica):
//  - u = 1, 2 and 4 micro-batches per unit visit, the stash on the host and on the
//    device, with and without prefetch, with clipping (updates after the last push) and
//    without (eager updates): three Adam steps give the losses and parameters (the
//    parameter server's master weights) of serial LibTorch's gradient accumulation over
//    the same micro-batches;
//  - the program the trainer runs is the schedule's (Fetch/Forward/Backward/Push ...);
//  - measured peak device bytes: constant in depth with the stash on the host, and
//    growing by one stashed activation per unit and micro-batch with it on the device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "axonn/gpt/gpt_l2l.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/device_memory.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;

namespace {

model::ModelDescription l2l_gpt(int blocks, int hidden = 32) {
  nlohmann::json j = nlohmann::json::parse(R"({"name": "gpt-l2l", "family": "gpt", "heads": 4, "seq_len": 8,
      "vocab": 64, "ffn_multiplier": 4})");
  j["num_layers"] = blocks;
  j["hidden"] = hidden;
  return model::model_from_json(j, "l2l_gpt");
}

// Data parallelism over the world, `u` micro-batches per replica.
plan::Plan l2l_plan(const model::ModelDescription& desc, int64_t seqs, int64_t u, plan::StashTier stash, bool prefetch) {
  const topo::Grid g{1, 1, 1, g_world->size(), 1};
  plan::Plan p = test_plan(desc, g, seqs, seqs / g.gdata / u);
  p.strategy = plan::Strategy::L2L;
  p.l2l.stash = stash;
  p.l2l.prefetch = prefetch;
  return p;
}

std::string describe(const plan::Plan& p, double clip) {
  return p.grid.to_string() + ", u = " + std::to_string(p.microbatches()) + ", stash " +
         plan::stash_tier_name(p.l2l.stash) + ", prefetch " + (p.l2l.prefetch ? "on" : "off") + ", clip " +
         std::to_string(clip);
}

}  // namespace

TEST(L2L, StepsEqualSerialGradientAccumulationWithAdam) {
  const auto desc = l2l_gpt(3);
  const auto cfg = gpt::GptConfig::from(desc);
  const int64_t seqs = 32;
  const int steps = 3;
  const double lr = 3e-3;
  auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 41);
  struct Case {
    int64_t u;
    plan::StashTier stash;
    bool prefetch;
    double clip;  // 0: no clipping, each unit updated as soon as it is reduced
  };
  const std::vector<Case> cases = {{1, plan::StashTier::Host, true, 0.5},
                                   {2, plan::StashTier::Device, true, 0.0},
                                   {4, plan::StashTier::Host, false, 0.0},
                                   {4, plan::StashTier::Device, true, 0.5}};
  for (const auto& c : cases) {
    const plan::Plan p = l2l_plan(desc, seqs, c.u, c.stash, c.prefetch);
    // The serial reference: LibTorch's Adam after gradient accumulation over the same
    // micro-batches (1e9: never clips).
    gpt::SerialGpt serial(cfg, 42), initial(cfg, 42);
    const auto serial_losses = serial_accumulation_curve(serial, *source, steps, lr, c.clip > 0 ? c.clip : 1e9,
                                                         p.grid.gdata, p.microbatches());
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptL2L run(p, pg, cfg, initial.named_parameters(), runtime::TrainerOptions{lr, c.clip});
    for (int s = 0; s < steps; ++s) {
      const double loss = run.trainer.step(source->batch(s)).loss;
      EXPECT_LT(std::abs(loss - serial_losses[static_cast<size_t>(s)]) / serial_losses[static_cast<size_t>(s)], 1e-5)
          << describe(p, c.clip) << ", step " << s;
    }
    const auto masters = run.master_weights();
    EXPECT_EQ(masters.size(), serial.named_parameters().size());
    // The model's relative error (every parameter, one vector) within 1e-5, and each
    // tensor's within 1e-4: the replicas' sum is associated differently from the serial
    // one, and where a gradient is mostly rounding noise (the key bias: softmax ignores
    // it; an element of fc2 after a GELU near zero) Adam's first steps, about lr times
    // the sign, turn that into a visible difference of those elements (a zero-initialised
    // bias: ~2e-5 of its small norm on 8 ranks).
    std::vector<at::Tensor> ours, theirs;
    double worst = 0;
    for (const auto& [name, w] : masters) {
      const at::Tensor& ref = serial_parameter(serial, name);
      ours.push_back(w.reshape({-1}));
      theirs.push_back(ref.detach().reshape({-1}));
      worst = std::max(worst, relative_error(w, ref));
      EXPECT_LT(relative_error(w, ref), 1e-4) << name << ", " << describe(p, c.clip);
    }
    const double model_error = relative_error(at::cat(ours), at::cat(theirs));
    if (g_world->rank() == 0)
      std::cout << "  " << describe(p, c.clip) << ": parameters' relative error " << model_error
                << " (worst tensor " << worst << ")\n";
    EXPECT_LT(model_error, 1e-5) << describe(p, c.clip);
    // It trained: the parameters moved away from the initial ones.
    EXPECT_GT(relative_error(masters.front().second, serial_parameter(initial, masters.front().first)), 1e-4);
  }
}

TEST(L2L, RunsTheScheduleProgram) {
  const auto desc = l2l_gpt(2);
  const plan::Plan p = l2l_plan(desc, 16, 2, plan::StashTier::Host, true);
  const auto cfg = gpt::GptConfig::from(desc);
  gpt::SerialGpt initial(cfg, 5);
  ProcessGrid pg(*g_world, p.grid, p.placement_order);
  gpt::GptL2L run(p, pg, cfg, initial.named_parameters());
  std::string text;
  for (const auto& in : run.trainer.program()) text += in.to_string() + " ";
  EXPECT_EQ(text,
            "Fetch(0) Prefetch(1) Forward(0, 0) Forward(0, 1) Release(0) Fetch(1) Prefetch(0) Backward(1, 0) "
            "Backward(1, 1) Push(1) Fetch(0) Backward(0, 0) Backward(0, 1) Push(0) WaitUpdates ");
  // Between steps no unit's weights are on the device: the parameters hold no elements.
  run.trainer.step(runtime::make_token_source("", cfg.vocab, 16, cfg.seq_len, 6)->batch(0));
  for (const auto& m : run.models)
    for (const auto& prm : m->parameters()) EXPECT_EQ(prm.tensor.numel(), 0) << prm.name;
}

// The peak over three steps (after a first one) for `blocks` blocks. The prefetch
// allocates its device buffers when it is issued, not when the copy thread runs, so the
// peak is the same on every run and under any load (before, it depended on how far the
// copy thread had got: 684104 to 884040 bytes seen on 2 loaded cores).
int64_t step_peak_bytes(int blocks, plan::StashTier stash, int64_t u) {
  const auto desc = l2l_gpt(blocks, 64);
  const auto cfg = gpt::GptConfig::from(desc);
  const int64_t seqs = 8 * g_world->size();
  const plan::Plan p = l2l_plan(desc, seqs, u, stash, true);
  gpt::SerialGpt initial(cfg, 7);
  ProcessGrid pg(*g_world, p.grid, p.placement_order);
  gpt::GptL2L run(p, pg, cfg, initial.named_parameters());
  auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 8);
  run.trainer.step(source->batch(0));
  runtime::DeviceMemory::reset_peak();
  const int64_t live = runtime::DeviceMemory::live_bytes();
  for (int64_t b = 1; b <= 3; ++b) run.trainer.step(source->batch(b));
  EXPECT_EQ(runtime::DeviceMemory::live_bytes(), live) << "device bytes left over by a step";
  return runtime::DeviceMemory::peak_bytes() - live;
}

TEST(L2L, DeviceMemoryIsConstantInDepthWithTheStashOnTheHost) {
  runtime::DeviceMemory::install();
  const int64_t u = 2;
  const int64_t host4 = step_peak_bytes(4, plan::StashTier::Host, u), host16 = step_peak_bytes(16, plan::StashTier::Host, u);
  EXPECT_GT(host4, 0);
  EXPECT_EQ(host16, host4);
  // On the device the stash holds each unit's output of every micro-batch: 12 more
  // units, each [rows, hidden] fp32 over the micro-batches (rows = 8 sequences x 8 tokens).
  const int64_t dev4 = step_peak_bytes(4, plan::StashTier::Device, u), dev16 = step_peak_bytes(16, plan::StashTier::Device, u);
  const int64_t stash_bytes = 12 * (8 * 8) * 64 * 4;
  if (g_world->rank() == 0)
    std::cout << "  peak bytes: host stash " << host4 << " (4 blocks), " << host16 << " (16); device stash " << dev4
              << ", " << dev16 << "\n";
  EXPECT_EQ(dev16 - dev4, stash_bytes) << dev4 << " vs " << dev16;
}

// Cross mixed precision (the paper's CMP): bf16 on the device, the fp32 master and Adam
// in the parameter server. Three steps follow serial fp32 gradient accumulation from the
// same (bf16-rounded) weights within bf16's error, and the master stays fp32.
TEST(L2L, CrossMixedPrecisionFollowsFp32) {
  auto desc = l2l_gpt(3);
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  const int64_t seqs = 16;
  const double lr = 3e-3;
  auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 43);
  gpt::SerialGpt serial(cfg, 44);
  {
    at::NoGradGuard no_grad;
    for (auto& [name, w] : serial.named_parameters()) w.copy_(w.to(at::kBFloat16));
  }
  gpt::GptConfig bf16 = cfg;
  bf16.dtype = at::kBFloat16;
  plan::Plan p = l2l_plan(desc, seqs, 2, plan::StashTier::Host, true);
  p.precision = plan::Precision::bf16();
  ProcessGrid pg(*g_world, p.grid, p.placement_order);
  gpt::GptL2L run(p, pg, bf16, serial.named_parameters(), runtime::TrainerOptions{lr, 0.5});
  ASSERT_EQ(run.models.front()->parameters().front().tensor.scalar_type(), at::kBFloat16);
  const auto serial_losses = serial_accumulation_curve(serial, *source, 3, lr, 0.5, p.grid.gdata, p.microbatches());
  double worst = 0;
  for (int s = 0; s < 3; ++s)
    worst = std::max(worst, std::abs(run.trainer.step(source->batch(s)).loss - serial_losses[static_cast<size_t>(s)]) /
                                serial_losses[static_cast<size_t>(s)]);
  EXPECT_LT(worst, 1e-2);
  std::vector<at::Tensor> ours, theirs;
  for (const auto& [name, w] : run.master_weights()) {
    EXPECT_EQ(w.scalar_type(), at::kFloat) << name;
    ours.push_back(w.reshape({-1}));
    theirs.push_back(serial_parameter(serial, name).detach().reshape({-1}));
  }
  const double model_error = relative_error(at::cat(ours), at::cat(theirs));
  if (g_world->rank() == 0)
    std::cout << "  bf16 L2L against fp32: worst loss error " << worst << ", parameters' relative error " << model_error
              << "\n";
  EXPECT_LT(model_error, 1e-2);
}
