#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Training under Slurm: a one-node user-space Slurm (scripts/local-slurm.sh),
# `srun -n 4 --mpi=pmix ./megatrain` with dp=4 reproduces the mpirun -np 4
# run (and the single process) within 1e-5 relative over 20 steps.
# SKIP (77) when Slurm is not installed or cannot start.
source "$(dirname "$0")/lib.sh"
command -v srun >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ] ||
  { echo "SKIP: slurm-wlm/munge not installed"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
export MEGATRAIN_SLURM_DIR=$(mktemp -d /tmp/mt-slurm-train.XXXXXX)
trap 'bash scripts/local-slurm.sh down >/dev/null 2>&1; rm -rf "$MEGATRAIN_SLURM_DIR" "$TMP"' EXIT
bash scripts/local-slurm.sh up >/dev/null || { echo "SKIP: local Slurm could not start"; exit 77; }
export SLURM_CONF=$MEGATRAIN_SLURM_DIR/slurm.conf
timeout 300 srun -n 4 --mpi=pmix "$MT" --config $CFG --set logging.metrics_file="$TMP/srun.jsonl" \
  >"$TMP/srun.log" 2>&1 || { echo "srun run failed"; tail -20 "$TMP/srun.log"; exit 1; }
grep -q "dp=4" "$TMP/srun.log"
echo "srun -n 4 --mpi=pmix: $(grep -c lm_loss "$TMP/srun.jsonl") iterations, dp=4"
mpirun -np 4 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
  -x OMP_NUM_THREADS "$MT" --config $CFG --set logging.metrics_file="$TMP/mpirun.jsonl" >"$TMP/mpirun.log" 2>&1
"$MT" --config $CFG --set logging.metrics_file="$TMP/one.jsonl" >/dev/null
echo "srun vs mpirun:"; compare_metrics "$TMP/srun.jsonl" "$TMP/mpirun.jsonl" 1e-5
echo "srun vs one process:"; compare_metrics "$TMP/srun.jsonl" "$TMP/one.jsonl" 1e-5
