#!/usr/bin/env bash
# Training under Slurm: plan for the allocation, then one axrun task per GPU with srun.
# Submit with `sbatch tools/sbatch_example.sh`; adapt the resources, model and paths.
# axrun reads its rank and size from SLURM_PROCID / SLURM_NTASKS and stops with a
# message if MPI sees another world (an Open MPI without Slurm's PMI: use
# `srun --mpi=pmix`, or `mpirun` inside the allocation).
#SBATCH --job-name=axonn
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --time=00:30:00
set -euo pipefail
AXONN=${AXONN:-$HOME/axonn/install}   # an install tree (cmake --install build --prefix ...)
GPUS=$((SLURM_NNODES * SLURM_NTASKS_PER_NODE))
"$AXONN/bin/axplan" plan --model gpt-125m --topology perlmutter --gpus "$GPUS" --batch-seqs 64 \
  --precision fp32 --output "plan-$SLURM_JOB_ID.json"
srun --mpi=pmix "$AXONN/bin/axrun" --plan "plan-$SLURM_JOB_ID.json" --steps 1000 --log-every 50 \
  --measure "measure-$SLURM_JOB_ID.json"
