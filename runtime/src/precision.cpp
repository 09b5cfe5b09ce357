// Element types of a plan's precision; see axonn/runtime/precision.hpp.
#include "axonn/runtime/precision.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

namespace {

at::ScalarType type_of(int64_t bytes, const std::string& where, const char* field) {
  if (bytes == 2) return at::kBFloat16;
  if (bytes == 4) return at::kFloat;
  throw InputError("runtime", "precision." + std::string(field) + " is " + std::to_string(bytes), where,
                   "2 (bf16) or 4 (fp32)");
}

}  // namespace

ElementTypes element_types(const plan::Precision& p, const std::string& where) {
  ElementTypes t;
  t.compute = type_of(p.compute_bytes, where, "compute_bytes");
  t.gradients = type_of(p.grad_reduce_bytes, where, "grad_reduce_bytes");
  if (p.grad_reduce_bytes < p.compute_bytes)
    throw InputError("runtime", "precision.grad_reduce_bytes " + std::to_string(p.grad_reduce_bytes) +
                                    " is narrower than compute_bytes " + std::to_string(p.compute_bytes),
                     where, "gradients at least as wide as the weights");
  return t;
}

at::ScalarType gradient_type(at::ScalarType weights, const plan::Precision& p) {
  return static_cast<int64_t>(c10::elementSize(weights)) < p.grad_reduce_bytes ? at::kFloat : weights;
}

}  // namespace axonn::runtime
