// axckpt: a checkpoint of axrun (axonn/runtime/checkpoint.hpp) to one serial state dict
// and back. No MPI job: it reads and writes files.
//
//   axckpt to-serial CKPT -o state.pt     # CKPT: a checkpoint, or an axrun --save directory (its newest)
//   axckpt from-serial state.pt -o DIR    # DIR/step-NNNNNNNN: a checkpoint any plan of the model resumes from
//
// state.pt is a LibTorch pickle of a dict: every parameter whole ("block0.qkv.weight"),
// Adam's moments ("<param>.exp_avg", "<param>.exp_avg_sq"), the fp32 master weights of
// mixed precision ("<param>.master"), and "axonn.step", "axonn.adam_steps",
// "axonn.seed". torch.load("state.pt") reads it in Python; torch::pickle_load in C++.
// Bad input exits with code 2 and a message naming the file.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/runtime/checkpoint.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  CLI::App app{"axckpt: an axrun checkpoint to one serial state dict (LibTorch pickle) and back"};
  app.require_subcommand(1);
  std::string from, output;
  auto* to_serial = app.add_subcommand("to-serial", "a checkpoint to one serial state dict");
  to_serial->add_option("checkpoint", from, "a checkpoint directory, or an axrun --save directory")->required();
  to_serial->add_option("-o,--output", output, "the state dict to write")->required();
  auto* from_serial = app.add_subcommand("from-serial", "a serial state dict to a checkpoint");
  from_serial->add_option("state", from, "a state dict written by to-serial")->required();
  from_serial->add_option("-o,--output", output, "the directory to write the checkpoint into")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    if (*to_serial) {
      const runtime::CheckpointManifest m = runtime::read_manifest(runtime::find_checkpoint(from));
      runtime::write_serial_state(m, output);
      std::cout << fmt::format("axckpt: {} (step {}, grid {}) -> {}\n", m.dir, m.step, m.grid.to_string(), output);
    } else {
      const std::string dir = runtime::checkpoint_from_serial(from, output);
      std::cout << fmt::format("axckpt: {} -> {}\n", from, dir);
    }
  } catch (const Error& e) {
    std::cerr << "axckpt: " << e.what() << "\n";
    return exit_code(e);
  } catch (const std::exception& e) {
    std::cerr << "axckpt: " << e.what() << "\n";
    return kExitInternal;
  }
  return 0;
}
