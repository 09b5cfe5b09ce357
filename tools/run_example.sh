#!/usr/bin/env bash
# The main job on the built-in example: set up; rank every candidate of every tensor
# mode (AxoNN's 3D, Megatron's 1d, Colossal-AI's 2d and 3d, sequence parallelism)
# for GPT-20B on 32 GPUs of Perlmutter (batch 32768 tokens) in one table, and write
# the best one's plan to plan.json;
# then plan a small GPT on 4 ranks and train it with the runtime (mpirun) as a
# byte-level language model on a text every Debian machine has.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD_DIR="${AXONN_BUILD_DIR:-build}"
"$BUILD_DIR/tools/axplan" rank --model gpt-20b --topology perlmutter --gpus 32 --batch-tokens 32768 --tensor-mode all \
  --top 10
"$BUILD_DIR/tools/axplan" plan --model gpt-20b --topology perlmutter --gpus 32 --batch-tokens 32768 --tensor-mode all \
  --output plan.json

TEXT=/usr/share/common-licenses/GPL-3
"$BUILD_DIR/tools/axplan" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 16 --grid 2,1,2,1,1 \
  --output plan-tiny.json
mpirun --oversubscribe --allow-run-as-root -np 4 "$BUILD_DIR/tools/axrun" --plan plan-tiny.json --steps 100 \
  --data "$TEXT" --lr 3e-3 --measure axrun_measure.json
