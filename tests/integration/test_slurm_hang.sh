#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Hang diagnosis under srun --mpi=pmix with the local Slurm
# (scripts/local-slurm.sh; docs/communication.md "Hang diagnosis"): 4 ranks
# tp=2 dp=2, parallel.distributed_timeout_minutes 0.05. As test_hang.sh:
# the step ends non-zero within 3 s + 30 s of the failpoint, no rank process
# is left, and every report names the stuck rank; the matrix "reporting rank
# -> ranks named" is printed per case.
#  1. rank 2 (a middle rank) frozen at iteration 3;
#  2. rank 0 frozen.
# MEGATRAIN_TEST_FULL=1: freeze and stop (SIGSTOP, test_hang.sh case 3) on
# every rank 0..3. Slurm ends an aborted step with SIGKILL and no SIGCONT
# (srun: "tasks 0,3: Killed"), so a stopped rank is never woken to say it
# was not scheduled: only the others' reports are checked.
# SKIP (77) when Slurm is not installed or cannot start.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hang_lib.sh"
command -v srun >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ] ||
  { echo "SKIP: slurm-wlm/munge not installed"; exit 77; }
export MEGATRAIN_SLURM_DIR=$(mktemp -d /tmp/mt-slurm-hang.XXXXXX)
trap 'bash scripts/local-slurm.sh down >/dev/null 2>&1; rm -rf "$MEGATRAIN_SLURM_DIR" "$TMP"' EXIT
bash scripts/local-slurm.sh up >/dev/null 2>&1 || { echo "SKIP: local Slurm could not start"; exit 77; }
export SLURM_CONF=$MEGATRAIN_SLURM_DIR/slurm.conf
TP2="--set parallel.tensor_model_parallel_size=2"
export HANG_STOP_WOKEN=0
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then CASES="freeze:0 freeze:1 freeze:2 freeze:3 stop:0 stop:1 stop:2 stop:3"
else CASES="freeze:2 freeze:0"; fi
for c in $CASES; do
  mode=${c%%:*} rank=${c##*:}
  case $mode in freeze) how=frozen ;; *) how="stopped (SIGSTOP)" ;; esac
  hang_case "srun -n 4 --mpi=pmix tp2 dp2, rank $rank $how" "$TMP/$mode$rank.log" "$mode" "$rank" \
    srun -n 4 --mpi=pmix "$MT" $HANG_ARGS $TP2
done
grep -h "megatrain: error: rank" "$TMP"/freeze0.log | head -3 | sed 's/^.*megatrain: error/  megatrain: error/'
