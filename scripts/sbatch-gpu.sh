#!/usr/bin/env bash
# scripts/sbatch-gpu.sh — sbatch template for a multi-node GPU run of
# megatrain: one Slurm task (= one MPI rank) per GPU, launched with
# `srun --mpi=pmix` (OpenMPI's only working Slurm launch mode). Each task sees
# exactly one GPU (--gpus-per-task=1), so the NCCL engine binds GPU 0 of its
# visible set (local rank % device count). Rank order: consecutive ranks on
# the same node, so keep tensor_model_parallel_size <= GPUs per node (tp is
# the fastest-varying coordinate, docs/topology.md).
#
# Usage: sbatch --nodes=2 scripts/sbatch-gpu.sh configs/my_run.json [extra megatrain args]
#   Adjust --gpus-per-node / --ntasks-per-node to the machine (8 on DGX).
#SBATCH --job-name=megatrain
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --exclusive
#SBATCH --output=megatrain-%j.out
set -euo pipefail
CONFIG=${1:?usage: sbatch scripts/sbatch-gpu.sh CONFIG.json [args]}
shift
MEGATRAIN=${MEGATRAIN:-./megatrain}

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}
export OPENBLAS_NUM_THREADS=1
# NCCL: report the transport once; uncomment to pin interfaces.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# export NCCL_SOCKET_IFNAME=ib0
# export NCCL_IB_HCA=mlx5

echo "job $SLURM_JOB_ID: $SLURM_JOB_NUM_NODES nodes x $SLURM_NTASKS_PER_NODE tasks, config $CONFIG"
# --kill-on-bad-exit: a rank that dies without MPI_Abort still ends the step.
srun --mpi=pmix --kill-on-bad-exit=1 --gpus-per-task=1 \
  --cpus-per-task="${SLURM_CPUS_PER_TASK:-8}" \
  "$MEGATRAIN" --config "$CONFIG" "$@"
