// Training data; see axonn/runtime/data.hpp.
#include "axonn/runtime/data.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "axonn/common/checksum.hpp"
#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

at::Generator generator(uint64_t seed, int64_t step) {
  return at::detail::createCPUGenerator(seed * 1000003ULL + static_cast<uint64_t>(step));
}

class SyntheticTokens final : public TokenSource {
 public:
  SyntheticTokens(int64_t vocab, int64_t seqs, int64_t seq_len, uint64_t seed)
      : vocab_(vocab), seqs_(seqs), len_(seq_len + 1), seed_(seed) {}
  at::Tensor batch(int64_t step) override {
    auto gen = generator(seed_, step);
    at::Tensor start = at::randint(vocab_, {seqs_, 1}, gen, at::kLong);
    at::Tensor stride = at::randint(1, 4, {seqs_, 1}, gen, at::kLong);
    at::Tensor pos = at::arange(len_, at::kLong).unsqueeze(0);
    return (start + stride * pos).remainder(vocab_);
  }
  std::string identity() const override { return "synthetic"; }

 private:
  int64_t vocab_, seqs_, len_;
  uint64_t seed_;
};

class TextBytes final : public TokenSource {
 public:
  TextBytes(std::vector<uint8_t> bytes, int64_t seqs, int64_t seq_len, uint64_t seed)
      : bytes_(at::tensor(std::vector<int64_t>(bytes.begin(), bytes.end()), at::kLong)),
        identity_("text, " + std::to_string(bytes.size()) + " bytes, fnv1a64 " + fnv1a64_hex(bytes.data(), bytes.size())),
        seqs_(seqs), len_(seq_len + 1), seed_(seed) {}
  std::string identity() const override { return identity_; }
  at::Tensor batch(int64_t step) override {
    auto gen = generator(seed_, step);
    at::Tensor offsets = at::randint(bytes_.numel() - len_ + 1, {seqs_, 1}, gen, at::kLong);
    return bytes_.index({(offsets + at::arange(len_, at::kLong).unsqueeze(0)).view({-1})}).view({seqs_, len_});
  }

 private:
  at::Tensor bytes_;
  std::string identity_;
  int64_t seqs_, len_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<TokenSource> make_token_source(const std::string& text_path, int64_t vocab, int64_t seqs,
                                               int64_t seq_len, uint64_t seed) {
  if (text_path.empty()) return std::make_unique<SyntheticTokens>(vocab, seqs, seq_len, seed);
  if (vocab < 256)
    throw InputError("data", "vocabulary of " + std::to_string(vocab) + " is too small for bytes", "--data " + text_path,
                "a model with vocab >= 256");
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw InputError("data", "cannot open data file", text_path, "a readable text file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(bytes.size()) < seq_len + 1)
    throw InputError("data", "file has " + std::to_string(bytes.size()) + " bytes", text_path,
                "at least seq_len + 1 = " + std::to_string(seq_len + 1) + " bytes");
  return std::make_unique<TextBytes>(std::move(bytes), seqs, seq_len, seed);
}

at::Tensor local_microbatch(const at::Tensor& global_batch, const topo::Grid& g, const topo::Coords& c,
                            int64_t microbatch_seqs, int64_t micro) {
  const int64_t per_group = global_batch.size(0) / g.replicas();
  const int64_t per_z = microbatch_seqs / g.gz;
  const int64_t d = c[static_cast<int>(topo::Axis::Data)];
  const int64_t first = d / g.sequence * per_group + micro * microbatch_seqs + c[static_cast<int>(topo::Axis::Z)] * per_z;
  at::Tensor seqs = global_batch.narrow(0, first, per_z);
  if (g.sequence == 1) return seqs;
  // Sequence parallelism: member d % sequence's chunk of positions, and the token after
  // it (its last target).
  const int64_t chunk = (global_batch.size(1) - 1) / g.sequence;
  return seqs.narrow(1, d % g.sequence * chunk, chunk + 1);
}

}  // namespace axonn::runtime
