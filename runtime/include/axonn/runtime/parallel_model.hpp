// What the executor (Trainer) needs from a model: this rank's parameter shards and the
// forward of its pipeline stage for one micro-batch. Implemented by the runnable
// models in model_zoo/ (e.g. the GPT); the model is built on an Engine it is handed
// (engine.hpp), and owns none of it.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "axonn/runtime/sharding.hpp"

namespace axonn::runtime {

class ParallelModel {
 public:
  virtual ~ParallelModel() = default;
  virtual std::vector<Parameter>& parameters() = 0;
  // The forward of this rank's stage for one micro-batch. `tokens`: this rank's
  // sequences of it, [seqs, seq_len + 1] int64 (inputs [:, :-1], targets [:, 1:]).
  // `activation`: undefined on the first stage, else what the previous stage sent
  // (activation_shape). Returns the activation for the next stage, or on the last stage
  // this rank's share of the loss: the sum of its tokens' losses divided by
  // `global_tokens` (the step's token count), so that summing over Z, data and
  // micro-batches gives the mean.
  virtual at::Tensor forward(const at::Tensor& activation, const at::Tensor& tokens, double global_tokens) = 0;
  // The shape of the activation this rank exchanges with its neighbouring stages for
  // `seqs` local sequences.
  virtual std::vector<int64_t> activation_shape(int64_t seqs) const = 0;
};

}  // namespace axonn::runtime
