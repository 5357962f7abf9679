#!/usr/bin/env bash
# Checkpoints of megatrain's previous per-layout format (mp_rank_*/
# model_optim_rng.bin, ZeRO distrib_optim_dp*.bin) still load under the
# layout that wrote them: the fixture is written at test time by the old
# writer (build/tests/tools/legacy_ckpt, from a run's iteration-5 state);
# resuming from it reproduces iterations 6-10 of the uninterrupted run
# bitwise, at zero_stage 0 (one process) and dp=2 ZeRO-2. Under another
# layout it is refused (exit 1) with a message saying why.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
TOOL=build/tests/tools/legacy_ckpt
[ -x $TOOL ] || { echo "SKIP: $TOOL not built"; exit 77; }
S=(--set training.train_iters=10 --set training.eval_interval=0 --set logging.log_interval=5)
launch() { # np cmd...
  local np=$1; shift
  if [ "$np" = 1 ]; then "$@"
  else mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$@"
  fi
}
case_() { # name np args...
  local name=$1 np=$2; shift 2
  launch $np "$MT" --config $CFG "${S[@]}" "$@" --set checkpoint.save="$TMP/$name" \
    --set checkpoint.save_interval=5 --set logging.metrics_file="$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 \
    || { tail "$TMP/$name.log"; exit 1; }
  ckpt_at "$TMP/$name" 5 "$TMP/$name-5"
  launch $np $TOOL --config $CFG "${S[@]}" "$@" --set checkpoint.load="$TMP/$name-5" \
    --set checkpoint.save="$TMP/$name-legacy" >"$TMP/$name-tool.log" 2>&1 || { cat "$TMP/$name-tool.log"; exit 1; }
  ls "$TMP/$name-legacy/iter_0000005/mp_rank_00" | grep -q "model_optim_rng.bin\|distrib_optim_dp000.bin"
  launch $np "$MT" --config $CFG "${S[@]}" "$@" --set checkpoint.load="$TMP/$name-legacy" \
    --set logging.metrics_file="$TMP/$name-r.jsonl" >"$TMP/$name-r.log" 2>&1 || { tail "$TMP/$name-r.log"; exit 1; }
  grep -q "previous per-layout format" "$TMP/$name-r.log" && grep -q "resumed from iteration 5" "$TMP/$name-r.log"
  compare_resumed "$TMP/$name.jsonl" "$TMP/$name-r.jsonl" 6 10 0 "legacy $name: resumed"
}
case_ one 1
case_ dp2_zero2 2 --set parallel.zero_stage=2
# another layout: refused, naming the reason
set +e
"$MT" --config $CFG "${S[@]}" --set checkpoint.load="$TMP/dp2_zero2-legacy" >"$TMP/x.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q "previous per-layout format, which loads only under the tp, pp, zero_stage" "$TMP/x.log" \
  || { echo "legacy checkpoint under another layout: exit $rc"; cat "$TMP/x.log"; exit 1; }
echo "another layout refused (exit 1): $(grep -m1 error "$TMP/x.log" | cut -c1-220)"
# a damaged ZeRO shard of data-parallel rank 1 is reported as such (file and
# checksum), never as a layout change; a missing one under a larger dp names
# the layout read from distrib_optim_dp000.bin
damaged() { # name pattern edit
  local d="$TMP/$1"; cp -r "$TMP/dp2_zero2-legacy" "$d"
  local f="$d/iter_0000005/mp_rank_00/distrib_optim_dp001.bin"
  eval "$3"
  set +e
  launch 2 "$MT" --config $CFG "${S[@]}" --set parallel.zero_stage=2 --set checkpoint.load="$d" \
    >"$TMP/$1.log" 2>&1; local rc=$?
  set -e
  [ $rc = 1 ] && grep -q "$2" "$TMP/$1.log" && ! grep -q "data-parallel\|no shard file" "$TMP/$1.log" \
    || { echo "$1: exit $rc"; cat "$TMP/$1.log"; exit 1; }
  echo "$1 (exit 1): $(grep -m1 error "$TMP/$1.log" | sed 's/^.*error: //' | cut -c1-160)"
}
damaged truncated_zero_shard "checksum mismatch in '.*distrib_optim_dp001.bin'" \
  'truncate -s $(( $(stat -c %s $f) / 2 )) $f'
damaged flipped_zero_shard "checksum mismatch in '.*distrib_optim_dp001.bin'" \
  'printf "\x55" | dd of=$f bs=1 seek=$(( $(stat -c %s $f) / 3 )) conv=notrunc status=none'
set +e
launch 4 "$MT" --config $CFG "${S[@]}" --set parallel.zero_stage=2 \
  --set checkpoint.load="$TMP/dp2_zero2-legacy" >"$TMP/dp4.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q "distrib_optim_dp002.bin' is missing: the checkpoint was saved with parallel.zero_stage 2 and data-parallel size 2" "$TMP/dp4.log" \
  || { echo "dp4 from a dp2 ZeRO checkpoint: exit $rc"; cat "$TMP/dp4.log"; exit 1; }
echo "dp 4 from dp 2 (exit 1): $(grep -m1 'dp002' "$TMP/dp4.log" | sed 's/^.*error: //' | cut -c1-160)"
echo "test_legacy_ckpt OK"
