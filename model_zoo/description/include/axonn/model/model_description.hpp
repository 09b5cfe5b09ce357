// A model as the planner and runtime see it: an ordered list of layers with
// weight shapes, expanded from a model-description JSON file (model_zoo/models/).
//
// Two file forms (docs/formats.md; JSON Schema in model_zoo/schema/):
//  - parametric: {"family": "gpt", "num_layers", "hidden", "heads", "seq_len", "vocab",
//    "ffn_multiplier"}. A GPT block is QKV (H -> 3H, column), attention (heads split over
//    the group that splits QKV's output columns), attention-out (H -> H, row), FC1
//    (H -> ffn, column), FC2 (ffn -> H, row); the token embedding comes first and the LM
//    head (H -> vocab, head) last. Positions are sinusoidal (no weights).
//  - explicit: {"family": "explicit", "seq_len", "hidden", "layers": [...]}, each layer
//    a linear {k, n, role}, an embedding {vocab, hidden}, an attention {heads,
//    head_dim}, or a block {layers: [...]}, each with an optional repeat count.
//    Pipeline units are the block instances (layers outside blocks join the nearest
//    block); a model without blocks has one unit per layer instance.
//
// Example:
//   auto m = axonn::model::load_model("gpt-125m");
//   m.layers.size();        // 1 + 12*5 + 1
//   m.parameters();         // weight elements of all layers
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace axonn::model {

enum class LayerKind {
  Linear,     // O = I * W, W is k x n
  Embedding,  // table of k = vocab rows by n = hidden columns; split as a row-parallel layer
  Attention,  // softmax(Q K^T) V over `heads` heads of `head_dim`; no weights, no collectives
};
const char* layer_kind_name(LayerKind k);

// A linear layer's role in its column/row pair (Megatron's names; AxoNN's "normal" and
// "transposed" layers): a column-parallel layer splits W's rows (k) over X and its
// columns (n) over Y, a row-parallel one the other way round (docs/model.md), so a pair
// needs no collective between its two layers. The head is column-parallel with the loss
// after it.
enum class LinearRole { Column, Row, Head };
const char* linear_role_name(LinearRole r);  // "column", "row", "head"

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Linear;
  int64_t k = 0;             // rows of W (linear: input features; embedding: vocab)
  int64_t n = 0;             // columns of W (output features; embedding: hidden)
  LinearRole role = LinearRole::Column;  // linear layers only
  int64_t heads = 0;         // attention only
  int64_t head_dim = 0;      // attention only
  int64_t unit = 0;          // pipeline unit: stages own contiguous runs of units
  bool in_block = false;     // part of a repeated transformer/encoder block
  bool recomputed = false;   // inside an activation-checkpointed unit (GPT blocks)
  // Element-wise work around the layer, for the compute model (docs/model.md section 7).
  // Set by the GPT expansion; explicit models leave them false.
  bool bias = false;            // a bias is added to the output
  bool norm_before = false;     // a layer norm produces the input (qkv, fc1, lm_head)
  bool gelu_after = false;      // GELU on the output (fc1)
  bool residual_after = false;  // the output is added to the residual stream (attn_out, fc2)
  bool loss_after = false;      // cross-entropy on the output (lm_head)

  int64_t weight_elements() const { return kind == LayerKind::Attention ? 0 : k * n; }
  // X and Y swap their parts: k over Y and n over X (row-parallel layers, and embeddings,
  // whose vocabulary rows are split over Y).
  bool swaps_xy() const { return kind == LayerKind::Embedding || (kind == LayerKind::Linear && role == LinearRole::Row); }
};

struct ModelDescription {
  std::string name;
  std::string family;       // "gpt" or "explicit"
  std::string description;
  int64_t seq_len = 0;      // tokens per sequence
  int64_t hidden = 0;       // width of the activations between units (pipeline messages)
  // GPT family only (0 otherwise):
  int64_t num_layers = 0, heads = 0, vocab = 0, ffn_hidden = 0;

  std::vector<Layer> layers;  // in execution (topological) order
  int64_t num_units = 0;      // pipeline units; a pipeline needs at least Ginter (each stage a contiguous run)
  nlohmann::json source;      // the JSON it was read from (embedded in plans)

  int64_t parameters() const;  // weight elements of all layers
};

// Validates every field; throws axonn::Error naming `origin` and the field.
ModelDescription model_from_json(const nlohmann::json& j, const std::string& origin);
// `name_or_path`: a file path, or the name of a file in model_zoo/models/.
ModelDescription load_model(const std::string& name_or_path);

}  // namespace axonn::model
