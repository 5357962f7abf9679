#!/usr/bin/env bash
# scripts/sbatch-cpu.sh — sbatch template for a CPU run of megatrain that
# survives the time limit and preemption: one Slurm task (= one MPI rank) per
# --ntasks, launched with `srun --mpi=pmix` (OpenMPI's only working Slurm
# launch mode), OMP threads = --cpus-per-task.
#
# Usage: sbatch [--nodes=N --ntasks-per-node=T --time=HH:MM:SS] \
#          scripts/sbatch-cpu.sh CONFIG.json CKPT_DIR [extra megatrain args]
#
# Preemption and requeue (README "Running on a cluster"):
#  - `--signal=B:USR1@120`: Slurm sends SIGUSR1 to this batch shell 120 s
#    before the time limit. The `B:` form signals the batch shell only (without
#    it Slurm signals the job steps' tasks directly, and the shell could not
#    tell a requeue from a finished run). The trap below forwards it to the
#    srun step, srun forwards it to every rank, megatrain finishes the current
#    iteration, saves to CKPT_DIR and exits 0; the script then requeues the job
#    (`scontrol requeue`, allowed by `--requeue`), which resumes from CKPT_DIR.
#    Leave at least one iteration plus one save of head room in the 120 s.
#  - A preemption by the scheduler (SIGTERM to the tasks, then SIGKILL after
#    KillWait) is handled the same way by megatrain (training.exit_signal);
#    Slurm requeues preempted jobs itself when PreemptMode=REQUEUE.
#  - checkpoint.save = CKPT_DIR always; checkpoint.load = CKPT_DIR once it
#    holds a checkpoint, so the first submission starts fresh and every later
#    one (requeue or a plain re-sbatch) continues.
#SBATCH --job-name=megatrain
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=4
#SBATCH --time=04:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=megatrain-%j.out
set -uo pipefail
CONFIG=${1:?usage: sbatch scripts/sbatch-cpu.sh CONFIG.json CKPT_DIR [args]}
CKPT=${2:?usage: sbatch scripts/sbatch-cpu.sh CONFIG.json CKPT_DIR [args]}
shift 2
MEGATRAIN=${MEGATRAIN:-./megatrain}

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
export OPENBLAS_NUM_THREADS=1

LOAD=()
[ -f "$CKPT/latest_checkpointed_iteration.txt" ] && LOAD=(--set checkpoint.load="$CKPT")
echo "job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}): ${SLURM_NTASKS:-?} tasks, config $CONFIG, checkpoints $CKPT${LOAD:+ (resuming)}"
# --kill-on-bad-exit: a rank that dies without MPI_Abort still ends the step.
srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" \
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
if [ $REQUEUE = 1 ] && [ $rc = 0 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
  echo "$(date +%T) checkpoint saved; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit $rc
