#!/usr/bin/env bash
# The GPU checks of docs/validation.md ("Matrix products measured on a GPU") in one run,
# for a lent GPU machine (one prepared command per device call): the products and the
# element-wise operations timed (tools/gpu_matmul_timings.py, about 40 s on an H100),
# then whole one-GPU steps without and with recomputation (tools/gpu_step_check.py).
# Each part prints its seconds. Not part of CI, which has no GPU. Afterwards, here:
#   build/tools/axplan fit-matmul --timings OUT/timings.json --topology dgx-h100
#   python3 tools/gpu_step_compare.py --topology dgx-h100 OUT/steps*.json
#
# usage: bash tools/gpu_checks.sh OUT_DIR [--steps-only]
set -euo pipefail
out=${1:?usage: tools/gpu_checks.sh OUT_DIR [--steps-only]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.csv" || true
case "${2:-}" in
  "" | --steps-only) ;;
  *) echo "gpu_checks: unknown option '$2' (expected --steps-only)" >&2; exit 2 ;;
esac
failed=0
part() {  # name, then the command; a failing part does not stop the others (one device call)
  local name=$1 t0=$SECONDS
  shift
  if "$@"; then
    echo "gpu_checks: $name took $((SECONDS - t0)) s"
  else
    echo "gpu_checks: $name FAILED after $((SECONDS - t0)) s" >&2
    failed=1
  fi
}
if [ "${2:-}" != "--steps-only" ]; then
  part timings python3 "$here/gpu_matmul_timings.py" "$here/../docs/validation/gpu-matmul-shapes.json" "$out/timings.json"
fi
configs=(--config 2048,16,8,16,4 --config 4096,32,4,8,2 --config 8192,64,2,4,1 --config 4096,32,4,16,4)
part steps python3 "$here/gpu_step_check.py" "${configs[@]}" --out "$out/steps.json"
part checkpointed-steps python3 "$here/gpu_step_check.py" --checkpoint "${configs[@]}" --out "$out/steps-checkpointed.json"
exit $failed
