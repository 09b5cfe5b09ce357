// What the trainer needs from a model: its local parameter shards and the loss of a
// micro-batch. Implemented by the runnable models in model_zoo/ (e.g. the GPT).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "axonn/runtime/comm_engine.hpp"
#include "axonn/runtime/sharding.hpp"

namespace axonn::runtime {

class ParallelModel {
 public:
  virtual ~ParallelModel() = default;
  virtual std::vector<Parameter>& parameters() = 0;
  // `tokens`: this rank's sequences of one micro-batch, [seqs, seq_len + 1] int64
  // (inputs are [:, :-1], targets [:, 1:]). Returns this rank's share of the loss:
  // the sum of its tokens' losses divided by `global_tokens`, the token count of the
  // whole step, so that summing over Z, data and micro-batches gives the mean.
  virtual at::Tensor loss(const at::Tensor& tokens, double global_tokens) = 0;
  // The scheduler of the model's collectives (gradient synchronisation included).
  virtual CommEngine& engine() = 0;
};

}  // namespace axonn::runtime
