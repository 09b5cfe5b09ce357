#!/usr/bin/env bash
# The main job on the built-in example: set up, rank every grid for GPT-20B on 32
# GPUs of Perlmutter (batch 32768 tokens), and write the best grid's plan to plan.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD_DIR="${AXONN_BUILD_DIR:-build}"
"$BUILD_DIR/tools/axplan" rank --model gpt-20b --topology perlmutter --gpus 32 --batch-tokens 32768 --top 10
"$BUILD_DIR/tools/axplan" plan --model gpt-20b --topology perlmutter --gpus 32 --batch-tokens 32768 --output plan.json
