// The element types the runtime computes and keeps gradients in for a plan's precision
// (plan::Precision, bytes per element): bf16 for 2 bytes (fp16 has no CPU matmul in
// LibTorch 1.13), fp32 for 4. Mixed precision (bf16 compute) keeps an fp32 master copy
// of the weights in the optimizer (optimizer.hpp); its gradients are bf16 (AxoNN 2022:
// all-reduced in bf16) or fp32 (Megatron-LM: accumulated and all-reduced in fp32).
//
// Example:
//   runtime::ElementTypes t = runtime::element_types(plan.precision, "plan.json");
//   cfg.dtype = t.compute;   // the model's weights and activations
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "axonn/plan/plan.hpp"

namespace axonn::runtime {

struct ElementTypes {
  at::ScalarType compute = at::kFloat;    // weights and activations
  at::ScalarType gradients = at::kFloat;  // weight gradients, accumulated and reduced over data
};

// Throws InputError naming `where` for byte counts the runtime does not run.
ElementTypes element_types(const plan::Precision& p, const std::string& where);

// The type of the gradient buffers of weights of type `weights` under `p`: fp32 when
// the plan reduces gradients in 4 bytes and the weights are narrower, else the weights'
// own (the fp64 reference tests keep fp64 throughout).
at::ScalarType gradient_type(at::ScalarType weights, const plan::Precision& p);

}  // namespace axonn::runtime
