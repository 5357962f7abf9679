#!/usr/bin/env bash
# Hang diagnosis (issue 18 item 3; docs/communication.md "Hang diagnosis"):
#  1. mpirun, 4 ranks tp=2 dp=2, rank 2 frozen at iteration 3
#     (MEGATRAIN_FAILPOINT=freeze:2:3), parallel.distributed_timeout_minutes
#     0.05 (3 s): the job ends non-zero within 3 s + 30 s of the freeze, no
#     rank process is left, and the report names rank 2 as not having
#     reached a collective of a group that contains it;
#  2. pipeline p2p: 2 ranks pp=2, rank 1 frozen: rank 0's report names the
#     receive it waits in and its peer, rank 1;
#  2b. case 1 with the shared window off and MEGATRAIN_HEARTBEAT_DIR set:
#     the report reads rank 2's state from its heartbeat file;
#  3. a normal 4-rank run with a 0.02-minute deadline is not aborted (the
#     deadline is per operation, not per run);
#  4. case 1 under srun --mpi=pmix with the local Slurm (skipped when Slurm
#     is not installed or cannot start).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x MEGATRAIN_FAILPOINT -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
TO=0.05 # minutes
ARGS="--config $CFG --set training.train_iters=1000 --set training.eval_interval=0 --set parallel.distributed_timeout_minutes=$TO"
REPORT_RANK2='megatrain: error: rank [0-9]+: [a-z/ -]+ on [a-z_]+ group \[([0-9]+, )*2(, [0-9]+)*\] \([0-9]+ bytes, iteration 3, .*ranks that have not reached it: ([0-9]+ \([^)]*\), )*2 \(last seen in '

# run_frozen LOG LAUNCHER...: start the job in the background, time from the
# freeze line to the end; prints "rc dt"
run_frozen() {
  local log=$1; shift
  "$@" >"$log" 2>&1 & local pid=$!
  ( sleep 150; kill -9 $pid 2>/dev/null ) & local guard=$!
  local i; for i in $(seq 1 600); do grep -q "failpoint freeze" "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  local t0; t0=$(date +%s.%N)
  set +e; wait $pid; local rc=$?; set -e
  kill $guard 2>/dev/null || true
  echo "$rc $(echo "$(date +%s.%N) - $t0" | bc)"
}
check_ended() { # NAME LOG RC DT
  local left; left=$(pgrep -f "^$MT --config $CFG --set training.train_iters=1000" | wc -l || true)
  echo "$1: exit $3, ${4}s after the freeze, $left rank processes left"
  grep -q "failpoint freeze" "$2" && [ "$3" != 0 ] && [ "$left" = 0 ] &&
    [ "$(echo "$4 < 3 + 30" | bc)" = 1 ] || { tail -20 "$2"; exit 1; }
}

# 1. mpirun tp=2 dp=2, rank 2 frozen at iteration 3
read -r rc dt < <(MEGATRAIN_FAILPOINT=freeze:2:3 run_frozen "$TMP/hang.log" $MPI -np 4 "$MT" $ARGS \
  --set parallel.tensor_model_parallel_size=2)
check_ended "mpirun tp2 dp2, rank 2 frozen" "$TMP/hang.log" "$rc" "$dt"
grep -Eq "$REPORT_RANK2" "$TMP/hang.log" || { echo "no report naming rank 2"; tail -20 "$TMP/hang.log"; exit 1; }
grep -E -m1 "$REPORT_RANK2" "$TMP/hang.log" | sed 's/^.*megatrain: error/  megatrain: error/'

# 2. pipeline p2p, rank 1 of pp=2 frozen
read -r rc dt < <(MEGATRAIN_FAILPOINT=freeze:1:3 run_frozen "$TMP/pp.log" $MPI -np 2 "$MT" $ARGS \
  --set parallel.pipeline_model_parallel_size=2)
check_ended "mpirun pp2, rank 1 frozen" "$TMP/pp.log" "$rc" "$dt"
PP_RE='rank 0: wait for a (receive|send) on pp group \[0, 1\] .*iteration 3, .*its peer is rank 1 \(last seen in '
grep -Eq "$PP_RE" "$TMP/pp.log" || { echo "no report naming the pp peer"; tail -20 "$TMP/pp.log"; exit 1; }
grep -E -m1 "$PP_RE" "$TMP/pp.log" | sed 's/^.*megatrain: error/  megatrain: error/'

# 2b. case 1 with the peers read from heartbeat files (as across nodes):
#     MEGATRAIN_WATCHDOG_SHM=0 turns the node's shared window off
mkdir -p "$TMP/hb"
read -r rc dt < <(MEGATRAIN_FAILPOINT=freeze:2:3 run_frozen "$TMP/hb.log" $MPI -np 4 \
  -x MEGATRAIN_WATCHDOG_SHM=0 -x MEGATRAIN_HEARTBEAT_DIR="$TMP/hb" "$MT" $ARGS \
  --set parallel.tensor_model_parallel_size=2)
check_ended "mpirun tp2 dp2, rank 2 frozen, heartbeat files" "$TMP/hb.log" "$rc" "$dt"
grep -Eq "$REPORT_RANK2" "$TMP/hb.log" || { echo "heartbeat files: no report naming rank 2"; tail -20 "$TMP/hb.log"; exit 1; }
grep -E -m1 "$REPORT_RANK2" "$TMP/hb.log" | sed 's/^.*megatrain: error/  megatrain: error/'

# 3. no freeze, a short deadline: the run completes
$MPI -np 4 "$MT" --config $CFG --set training.train_iters=6 --set training.eval_interval=0 \
  --set parallel.tensor_model_parallel_size=2 --set parallel.distributed_timeout_minutes=0.02 \
  >"$TMP/ok.log" 2>&1 || { echo "normal run with a 0.02-minute deadline failed"; tail -20 "$TMP/ok.log"; exit 1; }
grep -q "training done: 6 iterations" "$TMP/ok.log"
echo "normal run, deadline 0.02 minutes: completed ($(grep -o 'training done: .*' "$TMP/ok.log"))"

# 4. the same as 1 under the local Slurm
if command -v srun >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ]; then
  export MEGATRAIN_SLURM_DIR=$(mktemp -d /tmp/mt-slurm-hang.XXXXXX)
  trap 'bash scripts/local-slurm.sh down >/dev/null 2>&1; rm -rf "$MEGATRAIN_SLURM_DIR" "$TMP"' EXIT
  if bash scripts/local-slurm.sh up >/dev/null 2>&1; then
    export SLURM_CONF=$MEGATRAIN_SLURM_DIR/slurm.conf
    read -r rc dt < <(MEGATRAIN_FAILPOINT=freeze:2:3 run_frozen "$TMP/srun.log" srun -n 4 --mpi=pmix \
      "$MT" $ARGS --set parallel.tensor_model_parallel_size=2)
    check_ended "srun -n 4 --mpi=pmix tp2 dp2, rank 2 frozen" "$TMP/srun.log" "$rc" "$dt"
    grep -Eq "$REPORT_RANK2" "$TMP/srun.log" || { echo "srun: no report naming rank 2"; tail -20 "$TMP/srun.log"; exit 1; }
    grep -E -m1 "$REPORT_RANK2" "$TMP/srun.log" | sed 's/^.*megatrain: error/  megatrain: error/'
  else
    echo "srun case skipped: local Slurm could not start"
  fi
else
  echo "srun case skipped: slurm-wlm/munge not installed"
fi
