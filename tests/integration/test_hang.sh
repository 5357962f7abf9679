#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Hang diagnosis under mpirun (docs/communication.md "Hang diagnosis"): 4 ranks
# tp=2 dp=2, parallel.distributed_timeout_minutes 0.05 (3 s). Every case: the
# job ends non-zero within 3 s + 30 s of the failpoint, no rank process is
# left, and EVERY report names the stuck rank (not arrived, or where the
# waits of the ranks it names lead: rank 3 waiting for rank 1 that waits for
# a frozen rank 0 names 0 too). The matrix "reporting rank -> ranks named"
# is printed per case.
#  1. rank 2 (a middle rank) frozen at iteration 3 (MEGATRAIN_FAILPOINT=freeze:2:3:
#     its main thread sleeps, the process runs);
#  2. rank 0 frozen;
#  3. rank 2 stopped (stop:2:3: SIGSTOP inside its first collective of
#     iteration 3, as a debugger or ^Z would): the others name it as not
#     running (its watchdog thread has not run); woken by the abort's SIGCONT
#     it says it was not scheduled, and reports no hang of its own.
# MEGATRAIN_TEST_FULL=1: both failpoints on every rank 0..3 (the matrix).
# Pipeline p2p, heartbeat files and a normal run: test_hang_paths.sh; srun:
# test_slurm_hang.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hang_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
TP2="--set parallel.tensor_model_parallel_size=2"
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then CASES="freeze:0 freeze:1 freeze:2 freeze:3 stop:0 stop:1 stop:2 stop:3"
else CASES="freeze:2 freeze:0 stop:2"; fi
for c in $CASES; do
  mode=${c%%:*} rank=${c##*:}
  case $mode in freeze) how=frozen ;; *) how="stopped (SIGSTOP)" ;; esac
  hang_case "mpirun tp2 dp2, rank $rank $how" \
    "$TMP/$mode$rank.log" "$mode" "$rank" $MPI_HANG -np 4 "$MT" $HANG_ARGS $TP2
done
grep -h "megatrain: error: rank" "$TMP"/freeze2.log | head -3 | sed 's/^.*megatrain: error/  megatrain: error/'
