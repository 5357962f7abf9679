#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Hang diagnosis, the other paths (docs/communication.md "Hang diagnosis";
# the frozen-rank matrix is test_hang.sh):
#  1. pipeline p2p: 2 ranks pp=2, rank 1 frozen: rank 0's report names the
#     receive it waits in and its peer, rank 1;
#  2. 4 ranks tp=2 dp=2, rank 2 frozen, the shared window off
#     (MEGATRAIN_WATCHDOG_SHM=0) and MEGATRAIN_HEARTBEAT_DIR set: the reports
#     read the other ranks' state from their heartbeat files, and every one
#     names rank 2;
#  3. a normal 4-rank run with a 0.02-minute deadline is not aborted (the
#     deadline is per operation, not per run).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hang_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
REPORT_RANK2='megatrain: error: rank [0-9]+: [a-z/ -]+ on [a-z_]+ group \[([0-9]+, )*2(, [0-9]+)*\] \([0-9]+ bytes, iteration 3, .*ranks that have not reached it: ([0-9]+ \([^)]*\), )*2 \(last seen in '

# 1. pipeline p2p, rank 1 of pp=2 frozen
hang_case "mpirun pp2, rank 1 frozen" "$TMP/pp.log" freeze 1 $MPI_HANG -np 2 "$MT" $HANG_ARGS \
  --set parallel.pipeline_model_parallel_size=2
PP_RE='rank 0: wait for a (receive|send) on pp group \[0, 1\] .*iteration 3, .*its peer is rank 1 \(last seen in '
grep -Eq "$PP_RE" "$TMP/pp.log" || { echo "no report naming the pp peer"; tail -20 "$TMP/pp.log"; exit 1; }
grep -E -m1 "$PP_RE" "$TMP/pp.log" | sed 's/^.*megatrain: error/  megatrain: error/'

# 2. peers read from heartbeat files (as across nodes)
mkdir -p "$TMP/hb"
hang_case "mpirun tp2 dp2, rank 2 frozen, heartbeat files" "$TMP/hb.log" freeze 2 $MPI_HANG -np 4 \
  -x MEGATRAIN_WATCHDOG_SHM=0 -x MEGATRAIN_HEARTBEAT_DIR="$TMP/hb" "$MT" $HANG_ARGS \
  --set parallel.tensor_model_parallel_size=2
grep -Eq "$REPORT_RANK2" "$TMP/hb.log" || { echo "heartbeat files: no report naming rank 2"; tail -20 "$TMP/hb.log"; exit 1; }
grep -E -m1 "$REPORT_RANK2" "$TMP/hb.log" | sed 's/^.*megatrain: error/  megatrain: error/'

# 3. no freeze, a short deadline: the run completes
mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
  -x OMP_NUM_THREADS -np 4 "$MT" --config $CFG --set training.train_iters=6 --set training.eval_interval=0 \
  --set parallel.tensor_model_parallel_size=2 --set parallel.distributed_timeout_minutes=0.02 \
  >"$TMP/ok.log" 2>&1 || { echo "normal run with a 0.02-minute deadline failed"; tail -20 "$TMP/ok.log"; exit 1; }
grep -q "training done: 6 iterations" "$TMP/ok.log"
echo "normal run, deadline 0.02 minutes: completed ($(grep -o 'training done: .*' "$TMP/ok.log"))"
