#!/usr/bin/env bash
# `megatrain convert --upgrade` on a checkpoint of the previous per-layout
# format (the fixture is written at test time by the old writer,
# tests/tools/legacy_ckpt, from iteration 5 of a dp=2 ZeRO-1 run):
#  - the legacy checkpoint itself resumes under its layout, steps 6-10
#    bitwise equal to the uninterrupted run;
#  - `convert --upgrade` (run under that layout) rewrites it in the
#    layout-free format at the same iteration, byte-identical to the one the
#    run itself saved; resumed under the same layout it is bitwise, in one
#    process (ZeRO off) and with tp=2 within 1e-5;
#  - refusals, exit status and nothing written: a layout-free checkpoint
#    (nothing to upgrade), the wrong layout (1 process for a dp=2 ZeRO-1
#    checkpoint), missing --output (usage, exit 2), a non-empty --output
#    (exit 2, left as it was).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
TOOL=build/tests/tools/legacy_ckpt
[ -f tests/tools/legacy_ckpt.c ] && make -s $TOOL
[ -x $TOOL ] || { echo "SKIP: $TOOL not built"; exit 77; }
MPI2=(mpirun -np 2 --oversubscribe --bind-to none)
BASE=(--config "$CFG" --set training.train_iters=10 --set training.eval_interval=0
  --set logging.log_interval=1)
Z1=(--set parallel.zero_stage=1)

"${MPI2[@]}" "$MT" "${BASE[@]}" "${Z1[@]}" --set logging.metrics_file="$TMP/full.jsonl" \
  --set checkpoint.save="$TMP/full" --set checkpoint.save_interval=5 >"$TMP/full.log" 2>&1 \
  || { tail "$TMP/full.log"; exit 1; }
ckpt_at "$TMP/full" 5 "$TMP/full5"
"${MPI2[@]}" $TOOL "${BASE[@]}" "${Z1[@]}" --set checkpoint.load="$TMP/full5" \
  --set checkpoint.save="$TMP/old" >"$TMP/tool.log" 2>&1 || { tail "$TMP/tool.log"; exit 1; }
[ -f "$TMP/old/iter_0000005/mp_rank_00/distrib_optim_dp001.bin" ] \
  || { echo "FAIL: no legacy ZeRO shard file"; ls -R "$TMP/old"; exit 1; }

# resume RUN_NAME NP [--set ...]: steps 6-10 from checkpoint.load, metrics in $TMP/NAME.jsonl
resume() {
  local name=$1 np=$2
  shift 2
  mpirun -np "$np" --oversubscribe --bind-to none "$MT" "${BASE[@]}" "$@" \
    --set logging.metrics_file="$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 \
    || { echo "FAIL: $name"; tail "$TMP/$name.log"; exit 1; }
}

resume legacy 2 "${Z1[@]}" --set checkpoint.load="$TMP/old"
grep -q "loaded checkpoint at iteration 5 .*(previous per-layout format)" "$TMP/legacy.log" \
  || { echo "FAIL: the legacy load was not reported"; grep -i checkpoint "$TMP/legacy.log"; exit 1; }
compare_resumed "$TMP/full.jsonl" "$TMP/legacy.jsonl" 6 10 0 "legacy, same layout (bitwise)"

"${MPI2[@]}" "$MT" convert --upgrade --load "$TMP/old" --output "$TMP/new" >"$TMP/up.log" 2>&1 \
  || { echo "FAIL: upgrade"; cat "$TMP/up.log"; exit 1; }
grep -q "upgraded iteration 5 of" "$TMP/up.log" || { echo "FAIL: no upgrade line"; cat "$TMP/up.log"; exit 1; }
/usr/bin/python3 -c '
import json, os, sys
d = sys.argv[1] + "/iter_0000005"
m = json.load(open(d + "/metadata.json"))
assert m["format"] == "megatrain-dist-v2" and m["iteration"] == 5, m
assert not [f for f in os.listdir(d) if f.startswith("mp_rank")], os.listdir(d)
print("  upgraded: %s, iteration %d, %d files" % (m["format"], m["iteration"], len(os.listdir(d))))
' "$TMP/new"
same_ckpt "$TMP/full5/iter_0000005" "$TMP/new/iter_0000005" # the run's own checkpoint, byte for byte

resume same 2 "${Z1[@]}" --set checkpoint.load="$TMP/new"
compare_resumed "$TMP/full.jsonl" "$TMP/same.jsonl" 6 10 0 "upgraded, same layout (bitwise)"
resume one 1 --set checkpoint.load="$TMP/new"
compare_resumed "$TMP/full.jsonl" "$TMP/one.jsonl" 6 10 1e-5 "upgraded -> 1 process"
resume tp2 2 --set parallel.tensor_model_parallel_size=2 --set checkpoint.load="$TMP/new"
compare_resumed "$TMP/full.jsonl" "$TMP/tp2.jsonl" 6 10 1e-5 "upgraded -> tp=2"

# refuse NAME STATUS PATTERN CMD...: exit STATUS, PATTERN in the message, $TMP/NAME not created
refuse() {
  local name=$1 want=$2 pat=$3 rc=0
  shift 3
  "$@" >"$TMP/$name.log" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { echo "FAIL: $name exited $rc, expected $want"; cat "$TMP/$name.log"; exit 1; }
  grep -q "$pat" "$TMP/$name.log" || { echo "FAIL: $name: no '$pat'"; cat "$TMP/$name.log"; exit 1; }
  [ ! -e "$TMP/$name/latest_checkpointed_iteration.txt" ] && [ ! -e "$TMP/$name/iter_0000005" ] \
    || { echo "FAIL: $name wrote a checkpoint"; ls -R "$TMP/$name"; exit 1; }
  echo "  refused ($name, exit $rc): $(grep -m1 "$pat" "$TMP/$name.log" | cut -c1-150)"
}
refuse new_again 1 "nothing to upgrade" "$MT" convert --upgrade --load "$TMP/new" --output "$TMP/new_again"
refuse wrong_layout 1 "previous per-layout format" \
  "$MT" convert --upgrade --load "$TMP/old" --output "$TMP/wrong_layout"
refuse usage 2 "needs --load OLD and --output NEW" "$MT" convert --upgrade --load "$TMP/old"
# a non-empty --output: exit 2, its contents untouched
mkdir -p "$TMP/nonempty"; echo keep >"$TMP/nonempty/keep.txt"
refuse nonempty 2 "already exists and is not empty" \
  "${MPI2[@]}" "$MT" convert --upgrade --load "$TMP/old" --output "$TMP/nonempty"
[ "$(ls -A "$TMP/nonempty")" = keep.txt ] && [ "$(cat "$TMP/nonempty/keep.txt")" = keep ] \
  || { echo "FAIL: the non-empty --output was changed"; ls -la "$TMP/nonempty"; exit 1; }
echo "PASS"
