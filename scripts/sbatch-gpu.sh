#!/usr/bin/env bash
# scripts/sbatch-gpu.sh — sbatch template for a multi-node GPU run of
# megatrain: one Slurm task (= one MPI rank) per GPU, launched with
# `srun --mpi=pmix` (OpenMPI's only working Slurm launch mode). GPUs are bound
# per node (--gpus-per-node): every task of a node sees all of that node's
# GPUs and picks its own, local rank % device count (cuda/cuda_device.c), so
# NCCL sees the node's other GPUs and can use CUDA IPC / NVLink between ranks
# of a node (--gpus-per-task=1 would give each rank a one-GPU
# CUDA_VISIBLE_DEVICES, which can keep NCCL off them). Rank order: consecutive ranks on
# the same node, so keep tensor_model_parallel_size <= GPUs per node (tp is
# the fastest-varying coordinate, docs/topology.md).
#
# Usage: sbatch --nodes=2 scripts/sbatch-gpu.sh configs/my_run.json CKPT_DIR [extra megatrain args]
#   Adjust --gpus-per-node / --ntasks-per-node to the machine (8 on DGX);
#   keep them equal (one rank per GPU).
#
# Time limit and preemption, as scripts/sbatch-cpu.sh (README "Running on a
# cluster"): `--signal=B:USR1@120` sends SIGUSR1 to this batch shell 120 s
# before the limit (`B:` = the batch shell only; the trap forwards it to the
# srun step, whose ranks save at the next iteration boundary and exit 0), then
# the job requeues itself (`--requeue`, `scontrol requeue`). checkpoint.save
# is CKPT_DIR; checkpoint.load is CKPT_DIR once it holds a checkpoint, so a
# requeued or re-submitted job resumes. Size the 120 s to one iteration plus
# one save of the model.
#SBATCH --job-name=megatrain
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --exclusive
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=megatrain-%j.out
set -uo pipefail
CONFIG=${1:?usage: sbatch scripts/sbatch-gpu.sh CONFIG.json CKPT_DIR [args]}
CKPT=${2:?usage: sbatch scripts/sbatch-gpu.sh CONFIG.json CKPT_DIR [args]}
shift 2
MEGATRAIN=${MEGATRAIN:-./megatrain}

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}
export OPENBLAS_NUM_THREADS=1
# NCCL: report the transport once; uncomment to pin interfaces.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# export NCCL_SOCKET_IFNAME=ib0
# export NCCL_IB_HCA=mlx5

LOAD=()
[ -f "$CKPT/latest_checkpointed_iteration.txt" ] && LOAD=(--set checkpoint.load="$CKPT")
echo "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}): $SLURM_JOB_NUM_NODES nodes x $SLURM_NTASKS_PER_NODE tasks, config $CONFIG, checkpoints $CKPT${LOAD:+ (resuming)}"
# --kill-on-bad-exit: a rank that dies without MPI_Abort still ends the step.
# --gpus-per-node (from the #SBATCH line): all GPUs of the node visible to
# every task; each rank picks local_rank % device count.
srun --mpi=pmix --kill-on-bad-exit=1 --gpus-per-node="${SLURM_GPUS_PER_NODE:-8}" \
  --cpus-per-task="${SLURM_CPUS_PER_TASK:-8}" \
  "$MEGATRAIN" --config "$CONFIG" --set checkpoint.save="$CKPT" "${LOAD[@]}" "$@" &
STEP=$!
REQUEUE=0
trap 'echo "$(date +%T) SIGUSR1: time limit near, asking megatrain to save and exit"; REQUEUE=1; kill -USR1 $STEP' USR1
# `wait` returns early (status > 128) when the trap runs: wait again for the
# step's own status
while :; do
  wait $STEP; rc=$?
  [ $rc -gt 128 ] || break
  kill -0 $STEP 2>/dev/null && continue
  wait $STEP; rc=$?; break
done
if [ $REQUEUE = 1 ] && [ $rc = 0 ]; then
  echo "$(date +%T) checkpoint saved; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit $rc
