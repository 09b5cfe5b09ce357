// Checkpoints of a training run, written atomically by every rank in parallel and
// re-sliced on loading to any other layout (grid, placement order, pipeline stages,
// ZeRO on or off, mixed precision on or off).
//
// A checkpoint is a directory ROOT/step-00000010/ (10: the steps completed) holding
//   shard-x0-y1-z0-p0.pt   one per rank of data coordinate 0, this rank's shards of its
//                          stage's parameters and of Adam's state (training_state.hpp;
//                          ZeRO's blocks all-gathered first, so data-parallel replicas
//                          have nothing more to add): a LibTorch pickle
//                          (torch::pickle_save; torch.load in Python) of a dict
//                          name -> tensor with "<param>", "<param>.exp_avg",
//                          "<param>.exp_avg_sq", and "<param>.master" in mixed precision
//   manifest.json          format and version, the steps and Adam steps completed, the
//                          seed, the plan, the grid and placement order, and for each
//                          file its coordinates, size, FNV-1a hash (checksum.hpp) and its
//                          parameters (name, full shape, sharding)
//   COMPLETE               written last, after every file and the manifest are durable;
//                          a directory without it is never loaded
// Every file goes through write_file_atomically (temporary file, fsync, rename). After
// a save, the oldest complete checkpoints beyond `keep` are removed, and so are
// incomplete directories of earlier steps (an interrupted save).
//
// Loading re-slices: each of this rank's parameters is filled from every file holding
// part of it, one file in memory at a time, by matching element positions
// (shard_positions, sharding.hpp: which positions 0..n-1 of the full tensor a shard of
// either layout holds). On the same grid each rank reads its own file only. A rank never holds
// more than one file and one parameter's positions (8 bytes per element), not the
// whole model.
//
// Example:
//   save_checkpoint("ckpt", 10, run, grid, trainer.parameters(), trainer.state());   // keeps 2
//   const std::string dir = find_checkpoint("ckpt");              // ckpt/step-00000010
//   trainer.load_state(load_checkpoint(dir, grid.grid(), coords, trainer.parameters()));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/training_state.hpp"

namespace axonn::runtime {

inline constexpr int kCheckpointVersion = 1;

// What the manifest says about the run besides the state.
struct CheckpointRun {
  uint64_t seed = 0;       // of the weights and the data: a resumed run must use the same
  nlohmann::json plan;     // the plan that was run (plan::plan_to_json)
  std::string data;        // TokenSource::identity(): a resumed run must read the same data
};

struct SaveOptions {
  int64_t keep = 2;  // complete checkpoints kept under the root, the newest (>= 1)
  // Called on rank 0 after every file and the manifest are written, before COMPLETE
  // (tests kill the job here to interrupt a save).
  std::function<void()> before_commit;
};

// One file of a checkpoint as its manifest describes it.
struct CheckpointFile {
  std::string file;  // relative to the checkpoint directory
  topo::Coords coords{};
  int64_t bytes = 0;
  std::string fnv1a64;
  std::vector<Parameter> parameters;  // names, specs, full shapes (no tensors)
};

struct CheckpointManifest {
  std::string dir;  // the checkpoint directory
  int64_t step = 0, adam_steps = 0;
  uint64_t seed = 0;
  std::string data;  // TokenSource::identity(); empty when not recorded (a converted serial state)
  nlohmann::json plan;
  topo::Grid grid;
  topo::PlacementOrder order{};
  std::vector<CheckpointFile> files;
};

// The directory of step `step` under `root`: root/step-00000010.
std::string checkpoint_dir(const std::string& root, int64_t step);

// Writes the checkpoint of `step` completed steps under `root`; collective over
// grid.world(). `params` and `state` are this rank's (Trainer::parameters, state).
// Throws InputError naming the path when it cannot be written.
void save_checkpoint(const std::string& root, int64_t step, const CheckpointRun& run, ProcessGrid& grid,
                     const std::vector<Parameter>& params, const TrainingState& state, const SaveOptions& options = {});

// `path` itself when it is a complete checkpoint, else the complete checkpoint of the
// most steps under it. Throws InputError naming `path` when there is none.
std::string find_checkpoint(const std::string& path);

// The manifest of a complete checkpoint directory; InputError naming the file and field.
CheckpointManifest read_manifest(const std::string& dir);

// This rank's state for `params` (names, specs, full shapes) at `coords` of `grid`,
// re-sliced from the checkpoint; every file read is checked against its hash. Throws
// InputError when a parameter is missing, has another shape, or is not wholly covered.
TrainingState load_checkpoint(const CheckpointManifest& m, const topo::Grid& grid, const topo::Coords& coords,
                              const std::vector<Parameter>& params);

// The serial state dict: every parameter whole (re-sliced onto one rank), with Adam's
// state under the same keys as the shards ("<param>.exp_avg", ...), plus
// "axonn.step", "axonn.adam_steps" and "axonn.seed" (0-dim int64), as one LibTorch
// pickle at `path` (torch.load in Python gives the dict). No communication.
void write_serial_state(const CheckpointManifest& m, const std::string& path);

// The checkpoint that holds a serial state dict (as write_serial_state writes it), as
// the one file of a 1-rank layout: root/step-NNNNNNNN, complete. Any plan of the same
// model resumes from it (re-sliced). Returns its directory.
std::string checkpoint_from_serial(const std::string& serial_path, const std::string& root);

}  // namespace axonn::runtime
