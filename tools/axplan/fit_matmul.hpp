// `axplan matmul-shapes` and `axplan fit-matmul`: a GPU's matmul model from products
// timed on that GPU (docs/validation.md, "Matrix products measured on a GPU").
//
//   axplan matmul-shapes --runs megatron-lm-2021 --model gpt-20b --gpus 8 --batch-seqs 16 --out shapes.json
//   python3 tools/gpu_matmul_timings.py shapes.json timings.json      (on the GPU)
//   axplan fit-matmul --timings timings.json --topology dgx-h100 --fit-groups zoo:gpt-20b --out h100.json
//
// The shapes file lists the local products of the planner's compute model (section 7):
// those of each published run at its own grid and micro-batch, and those of each model
// on every grid of --gpus GPUs (planner::model_matmul_shapes). Each shape carries the
// group it was first found in ("megatron-lm-2021:gpt-1.7b", "zoo:gpt-20b"). The fit
// (planner::fit_matmul_roofline) uses the groups named and scores the rest.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "axonn/planner/compute_model.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::tools {

struct MatmulShapesOptions {
  std::string runs;                 // a published-runs file (empty: none)
  std::vector<std::string> models;  // model names or paths
  std::vector<int64_t> gpus = {8};  // each count's grids
  int64_t batch_seqs = 16;
  std::string out;                  // the shapes file to write (empty: standard output)
};
int run_matmul_shapes(const MatmulShapesOptions& o, std::ostream& out);

// One product of a timings file.
struct TimedShape {
  topo::MatmulTiming timing;
  std::string group;
  double spread = 0;  // (max - min) / median of the timed repeats, fraction
};
// One element-wise operation (topo::elementwise_op_names) timed on the same GPU.
struct TimedElementwise {
  std::string op;
  int64_t elements = 0;
  double forward_s = 0, backward_s = 0;  // seconds (Adam: forward only)
};
struct MatmulTimings {
  std::string device, software, dtype, method;
  std::vector<TimedShape> shapes;
  std::vector<TimedElementwise> elementwise;  // optional
};
// Throws InputError naming the file and the field.
MatmulTimings read_matmul_timings(const std::string& path);

struct FitMatmulOptions {
  std::string timings;
  std::string topology = "dgx-h100";
  std::vector<std::string> fit_groups;  // empty: every group (nothing held out)
  std::string out;                      // the fitted topology file to write (empty: none)
  std::string description;              // its description (empty: the base topology's)
  bool with_elementwise = false;        // write the timed element-wise costs (per element); without it
                                        // the written topology has none (the roofline's bytes)
};
int run_fit_matmul(const FitMatmulOptions& o, std::ostream& out);

}  // namespace axonn::tools
