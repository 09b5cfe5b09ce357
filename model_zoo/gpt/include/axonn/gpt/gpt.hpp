// A runnable GPT in two forms over the same named weights:
//  - SerialGpt: plain LibTorch on one process, the reference every parallel run is
//    checked against;
//  - ParallelGpt: one pipeline stage of the same network (all of it without a
//    pipeline) from the runtime's tensor-parallel operators, on a process grid, loaded
//    from (and gathered back to) the serial weights. Stage s holds the blocks of its
//    pipeline units; the first also the embedding, the last also the final layer norm,
//    the LM head and the loss.
// Architecture (pre-layer-norm, as GPT-2/3): token embedding + sinusoidal positions;
// per block h += attn_out(attention(qkv(ln1(h)))), h += fc2(gelu(fc1(ln2(h))));
// final layer norm; untied LM head; mean cross-entropy. No dropout. The shapes come
// from the model description the planner reads (family "gpt").
//
// Example:
//   GptConfig cfg = GptConfig::from(model::load_model("gpt-tiny"));
//   SerialGpt serial(cfg, /*seed=*/1);
//   runtime::StageEngine se(grid, schedule::build_schedule(plan, stage), nullptr);
//   ParallelGpt parallel(cfg, grid, serial.named_parameters(), se.schedule(), se.engine());
//   at::Tensor loss = serial.loss(tokens);          // tokens [seqs, seq_len + 1]
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/runtime/engine.hpp"
#include "axonn/runtime/parallel_model.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/tensor_ops.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::gpt {

struct GptConfig {
  int64_t layers = 0, hidden = 0, heads = 0, vocab = 0, seq_len = 0, ffn = 0;
  double layer_norm_eps = 1e-5;
  at::ScalarType dtype = at::kFloat;  // weights and activations: fp32, bf16 (mixed precision), fp64 (tests)
  // Throws axonn::Error unless the description is of family "gpt".
  static GptConfig from(const model::ModelDescription& m);
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Sinusoidal position encodings [seq_len, hidden]: sin on even columns, cos on odd.
at::Tensor position_encoding(int64_t seq_len, int64_t hidden, at::ScalarType dtype);
// The logits the loss is computed from: fp32 when they are narrower (bf16), as
// Megatron-LM's cross entropy; autograd casts the gradient back.
at::Tensor loss_precision(const at::Tensor& logits);

// The names, full shapes and sharding of every GPT parameter, in a fixed order.
struct ParameterLayout {
  std::string name;
  std::vector<int64_t> shape;
  runtime::ShardSpec spec;
};
// The sharding of the grid's tensor layout: 2d (no transposed roles, vectors over Y),
// else AxoNN's 3D (Colossal's 3D shards the parameters as AxoNN's).
std::vector<ParameterLayout> parameter_layout(const GptConfig& c, topo::TensorLayout layout = topo::TensorLayout::Axonn3d);

// The initial values of a parameter at `positions` (row-major indices into its full
// tensor; any shape, kept): weights ~ N(0, 0.02), each element a function of (seed,
// parameter name, position) alone (a counter-based generator: splitmix64 over the seed,
// the name's FNV-1a hash and the position, then Box-Muller), layer-norm scales 1,
// biases 0. Computed in double, rounded to fp32, then to `dtype`. So a rank computes
// exactly its own shards, and they are bitwise the serial model's of that seed.
at::Tensor initial_values(const ParameterLayout& l, const at::Tensor& positions, uint64_t seed, at::ScalarType dtype);

// Where a stage's initial weights come from: a serial model's full tensors (each rank
// keeps its shards of them), or the seed alone (sharded initialization: each rank
// computes only its shards, through initial_values and runtime::shard_positions, and
// never holds a full parameter). Both give bitwise the same shards for
// SerialGpt(cfg, seed).
class InitialWeights {
 public:
  InitialWeights(const NamedTensors& serial) : serial_(&serial) {}  // NOLINT: implicit on purpose
  static InitialWeights seeded(uint64_t seed);
  // This rank's shard (a new tensor) of parameter `l` at `coords` of `g`.
  at::Tensor shard(const ParameterLayout& l, const topo::Grid& g, const topo::Coords& coords, at::ScalarType dtype) const;

 private:
  InitialWeights() = default;
  const NamedTensors* serial_ = nullptr;
  uint64_t seed_ = 0;
};

class SerialGpt {
 public:
  // Weights ~ N(0, 0.02), biases 0, layer-norm scale 1 (initial_values); deterministic in `seed`.
  SerialGpt(const GptConfig& c, uint64_t seed);
  NamedTensors& named_parameters() { return params_; }
  at::Tensor loss(const at::Tensor& tokens);  // mean cross-entropy over all tokens

 private:
  const at::Tensor& p(const std::string& name) const;
  GptConfig c_;
  NamedTensors params_;
};

class ParallelGpt final : public runtime::ParallelModel {
 public:
  // This rank's shards of `weights` for the stage of `stage`; its weights registered
  // with `engine` (which must outlive the model).
  ParallelGpt(const GptConfig& c, runtime::ProcessGrid& grid, const InitialWeights& weights,
              const schedule::StageSchedule& stage, runtime::Engine& engine);
  std::vector<runtime::Parameter>& parameters() override { return params_; }
  at::Tensor forward(const at::Tensor& activation, const at::Tensor& tokens, double global_tokens) override;
  std::vector<int64_t> activation_shape(int64_t seqs) const override;
  // Blocks [first, last) on h [rows, hidden/Gx] (2d: hidden/Gy) (the forward pass, and the recompute
  // of activation checkpointing, which runs a checkpointed segment again).
  at::Tensor blocks_forward(int64_t first, int64_t last, const at::Tensor& h, int64_t seqs);
  // The stage's full-shape parameters (or their gradients) gathered from every rank of it.
  NamedTensors gather(bool gradients);

 private:
  const at::Tensor& p(const std::string& name) const;
  topo::Axis hidden_axis() const;  // the activations' hidden columns are split over it: X, or Y in 2d
  at::Tensor rows_of(const at::Tensor& t, topo::Axis axis) const;  // 3d: this rank's block of t's rows over `axis`
  int64_t rows_split(std::optional<topo::Axis> axis) const;        // the parts rows are split in (1: none)
  at::Tensor block_forward(int64_t block, const at::Tensor& h, int64_t seqs);
  GptConfig c_;
  runtime::ProcessGrid& grid_;
  runtime::Engine& engine_;
  const runtime::TensorOps& ops_;  // the grid's operators and shard specs (its layout's, or the sequence mode's)
  bool first_stage_, last_stage_, checkpointing_;
  int64_t first_block_, blocks_, interval_;  // the stage's blocks; blocks per checkpointed segment
  std::vector<runtime::Parameter> params_;
  std::vector<ParameterLayout> layout_;  // of params_
  at::Tensor positions_;  // [seq_len, hidden/Gx], this rank's columns (first stage only)
  std::map<std::string, int64_t> layer_of_;  // weight name -> the stage's layer index
};

}  // namespace axonn::gpt
