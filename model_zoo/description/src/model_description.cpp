// Model descriptions: parsing and expansion to layers; see axonn/model/model_description.hpp.
#include "axonn/model/model_description.hpp"

#include <algorithm>

#include "axonn/common/data_path.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"

namespace axonn::model {

const char* layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::Linear: return "linear";
    case LayerKind::Embedding: return "embedding";
    case LayerKind::Attention: return "attention";
  }
  return "?";
}

const char* linear_role_name(LinearRole r) {
  switch (r) {
    case LinearRole::Column: return "column";
    case LinearRole::Row: return "row";
    case LinearRole::Head: return "head";
  }
  return "?";
}

int64_t ModelDescription::parameters() const {
  int64_t total = 0;
  for (const auto& l : layers) total += l.weight_elements();
  return total;
}

namespace {

// Bounds on what a description may ask for: widths whose products (k * n, rows *
// vocab) stay far inside int64, and layer counts the expansion can hold in memory.
constexpr int64_t kMaxWidth = int64_t{1} << 24;
constexpr int64_t kMaxLayers = int64_t{1} << 16;

Layer linear(std::string name, int64_t k, int64_t n, LinearRole role, int64_t unit, bool recomputed) {
  Layer l;
  l.name = std::move(name);
  l.kind = LayerKind::Linear;
  l.k = k;
  l.n = n;
  l.role = role;
  l.unit = unit;
  l.in_block = recomputed;
  l.recomputed = recomputed;
  return l;
}

void expand_gpt(ModelDescription& m) {
  const int64_t H = m.hidden, F = m.ffn_hidden, L = m.num_layers;
  Layer emb;
  emb.name = "embedding";
  emb.kind = LayerKind::Embedding;
  emb.k = m.vocab;
  emb.n = H;
  // vocab rows split over Y, hidden columns over X (docs/model.md): Layer::swaps_xy
  emb.unit = 0;
  m.layers.push_back(emb);
  for (int64_t b = 0; b < L; ++b) {
    const std::string p = "block" + std::to_string(b) + ".";
    // Element-wise work as ParallelGpt::block_forward runs it: pre-norm, biases, GELU
    // after fc1, residual adds after attn_out and fc2.
    auto with = [](Layer l, bool norm_before, bool gelu_after, bool residual_after) {
      l.bias = true;
      l.norm_before = norm_before;
      l.gelu_after = gelu_after;
      l.residual_after = residual_after;
      return l;
    };
    m.layers.push_back(with(linear(p + "qkv", H, 3 * H, LinearRole::Column, b, true), true, false, false));
    Layer att;
    att.name = p + "attention";
    att.kind = LayerKind::Attention;
    att.heads = m.heads;
    att.head_dim = H / m.heads;
    att.unit = b;
    att.in_block = true;
    att.recomputed = true;
    m.layers.push_back(att);
    m.layers.push_back(with(linear(p + "attn_out", H, H, LinearRole::Row, b, true), false, false, true));
    m.layers.push_back(with(linear(p + "fc1", H, F, LinearRole::Column, b, true), true, true, false));
    m.layers.push_back(with(linear(p + "fc2", F, H, LinearRole::Row, b, true), false, false, true));
  }
  Layer head = linear("lm_head", H, m.vocab, LinearRole::Head, L - 1, false);  // no bias (ParallelGpt::loss)
  head.norm_before = true;
  head.loss_after = true;
  m.layers.push_back(head);
  m.num_units = L;
}

// One entry of an explicit "layers" list (not a block).
Layer explicit_layer(ObjectReader& r, int64_t unit) {
  Layer l;
  l.name = r.string_or("name", "");
  std::string type = r.one_of("type", {"linear", "embedding", "attention", "block"});
  if (type == "linear") {
    l.kind = LayerKind::Linear;
    l.k = r.positive_int_at_most("k", kMaxWidth);
    l.n = r.positive_int_at_most("n", kMaxWidth);
    // "role", or the older "transposed" flag (true: row), not both.
    if (r.has("role") && r.has("transposed"))
      r.fail("transposed", "given beside \"role\"", "one of them (\"role\": \"row\" is \"transposed\": true)");
    if (r.has("role")) {
      const std::string role = r.one_of("role", {"column", "row", "head"});
      l.role = role == "row" ? LinearRole::Row : role == "head" ? LinearRole::Head : LinearRole::Column;
    } else {
      l.role = r.boolean_or("transposed", false) ? LinearRole::Row : LinearRole::Column;
    }
  } else if (type == "embedding") {
    l.kind = LayerKind::Embedding;
    l.k = r.positive_int_at_most("vocab", kMaxWidth);
    l.n = r.positive_int_at_most("hidden", kMaxWidth);
  } else if (type == "attention") {
    l.kind = LayerKind::Attention;
    l.heads = r.positive_int_at_most("heads", kMaxWidth);
    l.head_dim = r.positive_int_at_most("head_dim", kMaxWidth);
  } else {
    r.fail("type", "a block cannot be nested inside a block", "\"linear\", \"embedding\" or \"attention\"");
  }
  l.unit = unit;
  return l;
}

void expand_explicit(ModelDescription& m, ObjectReader& r) {
  auto entries = r.object_array("layers");
  if (entries.empty()) r.fail("layers", "empty layer list", "at least one layer");
  int64_t unit = 0;
  for (auto& e : entries) {
    int64_t repeat = e.has("repeat") ? e.positive_int_at_most("repeat", kMaxLayers) : 1;
    bool is_block = e.has("type") && e.raw("type") == "block";
    if (is_block) {
      e.one_of("type", {"block"});
      std::string name = e.string_or("name", "block");
      bool recompute = e.boolean_or("checkpoint", true);
      auto inner = e.object_array("layers");
      if (inner.empty()) e.fail("layers", "empty block", "at least one layer");
      std::vector<Layer> body;
      for (auto& i : inner) {
        if (i.has("repeat")) i.fail("repeat", "repeat inside a block", "repeat on the block instead");
        body.push_back(explicit_layer(i, 0));
        i.finish();
      }
      for (int64_t rep = 0; rep < repeat; ++rep, ++unit)
        for (size_t li = 0; li < body.size(); ++li) {
          Layer l = body[li];
          l.name = name + std::to_string(rep) + "." + (l.name.empty() ? std::to_string(li) : l.name);
          l.unit = unit;
          l.in_block = true;
          l.recomputed = recompute;
          m.layers.push_back(l);
        }
    } else {
      Layer proto = explicit_layer(e, 0);
      for (int64_t rep = 0; rep < repeat; ++rep, ++unit) {
        Layer l = proto;
        if (l.name.empty()) l.name = layer_kind_name(l.kind);
        if (repeat > 1) l.name += std::to_string(rep);
        l.unit = unit;
        m.layers.push_back(l);
      }
    }
    e.finish();
  }
  m.num_units = unit;
  // With blocks, the pipeline units are the block instances: layers outside blocks join
  // the nearest block (leading ones the first block, the others the block before them).
  bool any_block = false;
  for (const auto& l : m.layers) any_block |= l.in_block;
  if (!any_block) return;
  int64_t renumbered = -1, last_block_unit = -1;
  for (auto& l : m.layers) {
    if (l.in_block && l.unit != last_block_unit) {
      last_block_unit = l.unit;
      ++renumbered;
    }
    l.unit = std::max<int64_t>(renumbered, 0);
  }
  m.num_units = renumbered + 1;
}

}  // namespace

ModelDescription model_from_json(const nlohmann::json& j, const std::string& origin) {
  ObjectReader r(j, origin, "model");
  ModelDescription m;
  m.source = j;
  m.name = r.string("name");
  m.description = r.string_or("description", "");
  m.family = r.one_of("family", {"gpt", "explicit"});
  m.seq_len = r.positive_int_at_most("seq_len", kMaxWidth);
  m.hidden = r.positive_int_at_most("hidden", kMaxWidth);
  if (m.family == "gpt") {
    m.num_layers = r.positive_int_at_most("num_layers", kMaxLayers);
    m.heads = r.positive_int_at_most("heads", kMaxWidth);
    m.vocab = r.positive_int_at_most("vocab", kMaxWidth);
    m.ffn_hidden = (r.has("ffn_multiplier") ? r.positive_int_at_most("ffn_multiplier", 64) : 4) * m.hidden;
    if (m.hidden % m.heads != 0)
      r.fail("heads", "hidden " + std::to_string(m.hidden) + " is not divisible by heads " +
                          std::to_string(m.heads),
             "a divisor of hidden");
    expand_gpt(m);
  } else {
    expand_explicit(m, r);
  }
  r.finish();
  return m;
}

ModelDescription load_model(const std::string& name_or_path) {
  std::string path = resolve_data_file("model", "model_zoo/models", name_or_path);
  return model_from_json(read_json_file("model", path), path);
}

}  // namespace axonn::model
