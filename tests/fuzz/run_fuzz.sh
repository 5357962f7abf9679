#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...] — build the libFuzzer targets
# (clang, -fsanitize=fuzzer,address,undefined), replay the regression inputs
# kept in tests/fuzz/regress/TARGET/ (inputs that once crashed a reader; each
# must now run clean), then run each target for SECONDS (default 60) from a
# generated seed corpus and print per target: executions, exec/s, crashes
# (0/1) and the reproducer path. FUZZ_RUNS=N runs N executions instead of
# for a time (-runs=N, SECONDS is then the upper bound).
# Targets (default: all):
#   mmidx        MMIDIDX index reader + GPT sample index (data/)
#   jsonl        JSON-lines reader + GPT-2 tokenizer round trip (data/)
#   dckpt        layout-free checkpoint: index.bin decode/validate, shard
#                files, piece reads with CRC check and fp32/bf16 conversion
#   dckpt_meta   layout-free checkpoint metadata.json
#   legacy       previous per-layout checkpoint (model_optim_rng.bin records)
#   config       config reader (JSON, overrides, checks, canonical round trip)
#   hw           planner hardware file (planner/plan_hw.c)
#   safetensors  safetensors file and sharded directory with index JSON
# Exit 0 = no crash, 1 = a crash (reproducer left in build/fuzz/TARGET/),
# 77 = no libFuzzer available.
set -u
cd "$(dirname "$0")/../.."
SECS="${1:-60}"
shift 2>/dev/null
ALL="mmidx jsonl dckpt dckpt_meta legacy config hw safetensors"
TARGETS="${*:-$ALL}"
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
CLANG="${CLANG:-clang}"
command -v "$CLANG" >/dev/null || { echo "SKIP: clang not installed"; exit 77; }
B=build/fuzz; mkdir -p "$B"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$B/probe.c"
"$CLANG" -fsanitize=fuzzer "$B/probe.c" -o "$B/probe" 2>/dev/null || { echo "SKIP: clang has no libFuzzer"; exit 77; }
FLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
LIBS="-lcjson -lpcre2-8 -ldeflate -lz -lm"
CORE="core/util.c core/rng.c core/hash.c core/fileio.c core/dtype.c"
DATA="data/indexed_dataset.c data/gpt_index.c data/data_util.c data/bpe.c data/jsonl.c"
DCKPT="trainer/dist_checkpoint_index.c trainer/dist_checkpoint_meta.c trainer/dist_checkpoint_load.c trainer/dist_checkpoint_copy.c"
srcs() {
  case "$1" in
    mmidx|jsonl) echo "$DATA $CORE" ;;
    dckpt|dckpt_meta) echo "$DCKPT $CORE" ;;
    config) echo "$(ls config/*.c | tr "\n" " ") $CORE" ;;
    legacy) echo "trainer/checkpoint.c trainer/checkpoint_buffers.c model/params.c $CORE" ;;
    hw) echo "planner/plan_hw.c $CORE" ;;
    safetensors) echo "core/safetensors.c core/safetensors_dir.c $CORE" ;;
    *) return 1 ;;
  esac
}
for t in $TARGETS; do srcs "$t" >/dev/null || { echo "unknown fuzz target '$t' (known: $ALL)"; exit 2; }; done

# ---- build (two at a time), only when a source is newer than the binary ----
build() {
  local t=$1 s; s="tests/fuzz/fuzz_$t.c $(srcs "$t")"
  if [ -x "$B/fuzz_$t" ] && [ -z "$(find $s tests/fuzz/run_fuzz.sh -newer "$B/fuzz_$t" 2>/dev/null)" ] &&
     [ -z "$(find config core trainer planner data -name '*.h' -newer "$B/fuzz_$t" 2>/dev/null)" ]; then return 0; fi
  "$CLANG" $FLAGS $s -o "$B/fuzz_$t.tmp" $LIBS > "$B/build_$t.log" 2>&1 && mv "$B/fuzz_$t.tmp" "$B/fuzz_$t"
}
pids=""; n=0; bfail=0
for t in $TARGETS; do
  build "$t" & pids="$pids $!"; n=$((n+1))
  if [ $n -ge 2 ]; then for p in $pids; do wait "$p" || bfail=1; done; pids=""; n=0; fi
done
for p in $pids; do wait "$p" || bfail=1; done
if [ $bfail -ne 0 ]; then
  for t in $TARGETS; do [ -x "$B/fuzz_$t" ] || { echo "build of fuzz_$t failed:"; cat "$B/build_$t.log"; }; done
  exit 1
fi

# ---- seed corpora (valid inputs of each reader) and dictionaries ----
/usr/bin/python3 tests/fuzz/make_seeds.py "$B" || exit 1

# ---- regression inputs: each must run clean ----
fails=0
for t in $TARGETS; do
  R=tests/fuzz/regress/$t
  [ -d "$R" ] && [ -n "$(ls -A "$R" 2>/dev/null)" ] || continue
  if "$B/fuzz_$t" -runs=1 "$R"/* > "$B/regress_$t.log" 2>&1; then
    echo "fuzz_$t: $(ls "$R" | wc -l) regression inputs replayed clean"
  else
    echo "fuzz_$t: a regression input in $R crashes again:"; tail -n 30 "$B/regress_$t.log"; fails=$((fails+1))
  fi
done

# ---- fuzz ----
for t in $TARGETS; do
  A="$B/$t"; rm -rf "$A"; mkdir -p "$A"
  work="$B/work_$t"; rm -rf "$work"; mkdir -p "$work"   # new inputs found this run
  dict=""; [ -f "$B/$t.dict" ] && dict="-dict=$B/$t.dict"
  maxlen=4096; case $t in dckpt|dckpt_meta) maxlen=16384 ;; esac
  runs=""; [ -n "${FUZZ_RUNS:-}" ] && runs="-runs=$FUZZ_RUNS"
  t0=$(date +%s.%N)
  "$B/fuzz_$t" -max_total_time="$SECS" $runs -print_final_stats=1 -max_len=$maxlen -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 $dict -artifact_prefix="$A/" "$work" "$B/corpus_$t" \
    > "$B/fuzz_$t.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  execs=$(grep -m1 'stat::number_of_executed_units' "$B/fuzz_$t.log" | awk '{print $2}')
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}')
  rate=$(awk -v e="${execs:-0}" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", e/(b-a)}')
  repro=$(ls "$A"/crash-* "$A"/leak-* "$A"/oom-* "$A"/timeout-* "$A"/slow-unit-* 2>/dev/null | grep -v slow-unit | head -1)
  crashed=0; if [ $rc -ne 0 ] || [ -n "$repro" ]; then crashed=1; fi
  printf 'fuzz_%-12s %4ss  executions %10s  exec/s %7s  crashes %d  %s\n' "$t" "$secs" "${execs:-?}" "$rate" \
    "$crashed" "${repro:+reproducer $repro}"
  if [ $crashed -ne 0 ]; then fails=$((fails+1)); grep -m1 -A25 'ERROR\|==ABORT\|runtime error\|deadly signal' "$B/fuzz_$t.log" | head -40; fi
done
[ $fails -eq 0 ]
