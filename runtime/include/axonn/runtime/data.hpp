// Training data: every rank builds the same global batch of token sequences for a
// step, then takes its own slice (data group, micro-batch, Z share).
//
//   synthetic: arithmetic progressions modulo the vocabulary with a random start and
//              step, so there is something to learn (the default).
//   text:      byte-level language modelling on any file (vocabulary >= 256), windows
//              at random offsets.
//
// Example:
//   auto src = make_token_source("", 256, 8, 16, 7);   // synthetic
//   at::Tensor b = src->batch(0);                       // [8, 17] int64, same on every rank
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "axonn/topology/grid.hpp"

namespace axonn::runtime {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // [seqs, seq_len + 1] int64 tokens for `step`; deterministic in (seed, step).
  virtual at::Tensor batch(int64_t step) = 0;
  // What the batches follow from besides the seed, for a checkpoint's manifest:
  // "synthetic", or "text, <N> bytes, fnv1a64 <hash>" (the file's content, not its path).
  virtual std::string identity() const = 0;
};

// `text_path` empty: synthetic. Throws axonn::Error for a missing/short file or a
// vocabulary too small for bytes.
std::unique_ptr<TokenSource> make_token_source(const std::string& text_path, int64_t vocab, int64_t seqs,
                                               int64_t seq_len, uint64_t seed);

// This rank's sequences of micro-batch `micro` in a global batch: the replica's share,
// then the micro-batch, then the Z share; with sequence parallelism (g.sequence > 1)
// only the member's chunk of positions, plus the next token: [seqs, seq_len/sequence + 1].
at::Tensor local_microbatch(const at::Tensor& global_batch, const topo::Grid& g, const topo::Coords& coords,
                            int64_t microbatch_seqs, int64_t micro);

}  // namespace axonn::runtime
