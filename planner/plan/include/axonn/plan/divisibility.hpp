// Does a grid divide a model and a batch? Shared by the planner (to reject
// candidates) and the runtime (to refuse a plan), docs/model.md section 4.
//
// Requirements in AxoNN's layout, for every layer (X and Y swap for transposed layers
// and embeddings); another layout's come from its entry (plan/layout_rules.hpp):
//   k % Gx == 0, n % Gy == 0           the weight's rows/columns split over X/Y
//   (k/Gx * n/Gy) % Gz == 0            the local block is sharded evenly over Z
//   heads % Gy == 0                    attention heads split over QKV's output group
// and for the batch and pipeline:
//   seqs % Gdata == 0, (seqs/Gdata) % microbatch_seqs == 0, microbatch_seqs % Gz == 0
//   num_units >= Ginter                every pipeline stage holds at least one unit
//
// Example:
//   auto why = divisibility_problem(gpt20b, Grid{3, 1, 1, 1, 1}, 16, 16);
//   // *why == "layer embedding: n=7168 is not divisible by gx=3"   (7168 = 2^10 * 7)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "axonn/model/model_description.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::plan {

// nullopt when everything divides, else the first problem in words: the batch and
// pipeline first (batch_divisibility_problem), then the layers in order.
std::optional<std::string> divisibility_problem(const model::ModelDescription& m,
                                                const topo::Grid& g, int64_t batch_seqs,
                                                int64_t microbatch_seqs);

// The two halves of divisibility_problem, for callers that check each distinct layer
// once (the planner): the batch and pipeline requirements, and one layer's
// (the message then starts "layer <name>: ").
std::optional<std::string> batch_divisibility_problem(const model::ModelDescription& m, const topo::Grid& g,
                                                      int64_t batch_seqs, int64_t microbatch_seqs);
bool layer_divides(const model::Layer& l, const topo::Grid& g);
std::string layer_divisibility_problem(const model::Layer& l, const topo::Grid& g);  // "" when it divides

}  // namespace axonn::plan
