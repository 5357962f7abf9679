#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]   open-ended (bench/fuzz.sh)
# tests/fuzz/run_fuzz.sh --ci [TARGET...]        deterministic (CI, test_data_fuzz.sh)
# Build the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined),
# replay the regression inputs kept in tests/fuzz/regress/TARGET/ (inputs
# that once crashed a reader; each must now run clean), then fuzz each target
# from a generated seed corpus plus its regression inputs.
#  open-ended: a random seed, for SECONDS (default 60) per target; prints per
#    target executions, exec/s, crashes (0/1) and the reproducer path.
#    FUZZ_RUNS=N runs N executions instead of for a time (-runs=N, SECONDS is
#    then the upper bound).
#  --ci: a fixed seed (FUZZ_SEED, default 1) and a fixed number of
#    executions per target (FUZZ_CI_RUNS, default the budget below: the
#    corpus replayed, then mutations up to it), one process, no time limit
#    but a 600 s guard. Everything printed is a function of the sources, the
#    corpus and the seed (no times, no rates), so two runs of one tree print
#    the same lines: executions, coverage (cov, ft), corpus size, crashes.
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
# 77 = no libFuzzer available. FUZZ_BUILD=DIR: build and run in DIR instead
# of build/fuzz.
set -u
cd "$(dirname "$0")/../.."
CI=0
if [ "${1:-}" = "--ci" ]; then CI=1; shift; SECS=600; else SECS="${1:-60}"; shift 2>/dev/null; fi
ALL="mmidx jsonl dckpt dckpt_meta legacy config hw safetensors"
TARGETS="${*:-$ALL}"
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
CLANG="${CLANG:-clang}"
command -v "$CLANG" >/dev/null || { echo "SKIP: clang not installed"; exit 77; }
B="${FUZZ_BUILD:-build/fuzz}"; mkdir -p "$B"   # FUZZ_BUILD: another build folder
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$B/probe.c"
"$CLANG" -fsanitize=fuzzer "$B/probe.c" -o "$B/probe" 2>/dev/null || { echo "SKIP: clang has no libFuzzer"; exit 77; }
FLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
LIBS="-lcjson -lpcre2-8 -lutf8proc -ldeflate -lz -lm"
CORE="core/util.c core/rng.c core/hash.c core/fileio.c core/dtype.c core/json.c core/failpoint.c"
DATA="data/indexed_dataset.c data/gpt_index.c data/np_random.c data/data_util.c data/bpe.c data/bpe_encode.c data/bpe_gpt2.c data/jsonl.c"
DCKPT="checkpoint/dist_checkpoint_index.c checkpoint/dist_checkpoint_meta.c checkpoint/dist_checkpoint_load.c checkpoint/dist_checkpoint_copy.c"
srcs() {
  case "$1" in
    mmidx|jsonl) echo "$DATA $CORE" ;;
    dckpt|dckpt_meta) echo "$DCKPT $CORE" ;;
    config) echo "$(ls config/*.c | tr "\n" " ") $CORE" ;;
    legacy) echo "checkpoint/legacy_reader.c checkpoint/legacy_records.c tests/support/legacy_writer.c model/params.c $DCKPT $CORE" ;;
    hw) echo "planner/plan_hw.c $CORE" ;;
    safetensors) echo "core/safetensors.c core/safetensors_dir.c tests/support/probe_core.c $CORE" ;;
    *) return 1 ;;
  esac
}
for t in $TARGETS; do srcs "$t" >/dev/null || { echo "unknown fuzz target '$t' (known: $ALL)"; exit 2; }; done

# ---- build: every source compiled once (two at a time, only when it or a
# header is newer than its object), then each target linked ----
O=$B/obj; mkdir -p "$O"
all_src=$(for t in $TARGETS; do echo "tests/fuzz/fuzz_$t.c $(srcs "$t")"; done | tr ' ' '\n' | grep . | sort -u)
newest_h=$(find config core checkpoint optimizer tools trainer planner data model parallel tests/support -name '*.h' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2)
for f in $all_src; do
  o="$O/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || { [ -n "$newest_h" ] && [ "$newest_h" -nt "$o" ]; }; then echo "$f"; fi
done | xargs -r -P 2 -I{} sh -c 'f={}; "$0" $1 -c "$f" -o "$2/$(echo "$f" | tr / _).o" 2>"$2/$(echo "$f" | tr / _).log" || { cat "$2/$(echo "$f" | tr / _).log"; exit 1; }' "$CLANG" "$FLAGS" "$O" || { echo "fuzz: compilation failed"; exit 1; }
for t in $TARGETS; do
  objs=""; for f in tests/fuzz/fuzz_$t.c $(srcs "$t"); do objs="$objs $O/$(echo "$f" | tr / _).o"; done
  "$CLANG" $FLAGS $objs -o "$B/fuzz_$t" $LIBS > "$B/build_$t.log" 2>&1 || { echo "link of fuzz_$t failed:"; cat "$B/build_$t.log"; exit 1; }
done

# ---- seed corpora (valid inputs of each reader) and dictionaries ----
/usr/bin/python3 tests/fuzz/make_seeds.py "$B" || exit 1

# --ci: the targets' files go to one fixed folder (tests/fuzz/fuzz_scratch.h),
# relative so that its text is the same on every machine, emptied before each
# run of a target; open-ended runs write to /dev/shm (faster, one per pid)
if [ $CI -eq 1 ]; then export FUZZ_SCRATCH="$B/scratch"; else unset FUZZ_SCRATCH; fi
fresh_scratch() { [ -z "${FUZZ_SCRATCH:-}" ] || { rm -rf "$FUZZ_SCRATCH"; mkdir -p "$FUZZ_SCRATCH"; }; }

# ---- regression inputs: each must run clean ----
fails=0
for t in $TARGETS; do
  R=tests/fuzz/regress/$t
  [ -d "$R" ] && [ -n "$(ls -A "$R" 2>/dev/null)" ] || continue
  fresh_scratch
  if "$B/fuzz_$t" -runs=1 "$R"/* > "$B/regress_$t.log" 2>&1; then
    echo "fuzz_$t: $(ls "$R" | wc -l) regression inputs replayed clean"
  else
    echo "fuzz_$t: a regression input in $R crashes again:"; tail -n 30 "$B/regress_$t.log"; fails=$((fails+1))
  fi
done

# ---- fuzz ----
# CI budget: executions per target (the seed corpus and the regression inputs
# first, then mutations), sized for about 2-5 s each on one CI core
ci_runs() {
  case "$1" in
    dckpt|legacy|safetensors|hw) echo 3000 ;;
    config) echo 6000 ;;
    *) echo 20000 ;;
  esac
}
# --ci: the address space is not randomized (setarch -R): libFuzzer's CMP
# mutations take operands of compared values, pointers among them, which ASLR
# makes differ between runs; without setarch they are turned off
NORAND=""; NOCMP=""
if [ $CI -eq 1 ]; then
  if setarch "$(uname -m)" -R true 2>/dev/null; then NORAND="setarch $(uname -m) -R"
  else NOCMP="-use_cmp=0"; echo "note: setarch -R unavailable: fuzzing with -use_cmp=0"; fi
fi
for t in $TARGETS; do
  if [ $CI -eq 1 ]; then
    A="$B/$t"; rm -rf "$A"; mkdir -p "$A"
    work="$B/work_$t"; rm -rf "$work"; mkdir -p "$work"
    dict=""; [ -f "$B/$t.dict" ] && dict="-dict=$B/$t.dict"
    maxlen=4096; case $t in dckpt|dckpt_meta) maxlen=16384 ;; esac
    R=tests/fuzz/regress/$t; regress=""; [ -d "$R" ] && regress="$R"
    runs="${FUZZ_CI_RUNS:-$(ci_runs "$t")}"
    fresh_scratch
    timeout 600 $NORAND "$B/fuzz_$t" -seed="${FUZZ_SEED:-1}" -runs="$runs" -reload=0 $NOCMP -print_final_stats=1 \
      -max_len=$maxlen -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      $dict -artifact_prefix="$A/" "$work" "$B/corpus_$t" $regress > "$B/fuzz_$t.log" 2>&1; rc=$?
    execs=$(grep -m1 'stat::number_of_executed_units' "$B/fuzz_$t.log" | awk '{print $2}')
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$B/fuzz_$t.log" | tail -1)
    cov=$(echo "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$done_line" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')
    repro=$(ls "$A"/crash-* "$A"/leak-* "$A"/oom-* "$A"/timeout-* 2>/dev/null | head -1)
    crashed=0; if [ $rc -ne 0 ] || [ -n "$repro" ]; then crashed=1; fi
    printf 'fuzz_%-12s seed %s  executions %7s  cov %5s  ft %6s  corpus %5s  crashes %d%s\n' "$t" \
      "${FUZZ_SEED:-1}" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashed" \
      "${repro:+  reproducer $repro}"
    if [ $crashed -ne 0 ]; then fails=$((fails+1)); grep -m1 -A25 'ERROR\|==ABORT\|runtime error\|deadly signal' "$B/fuzz_$t.log" | head -40; fi
    continue
  fi
  A="$B/$t"; rm -rf "$A"; mkdir -p "$A"
  work="$B/work_$t"; rm -rf "$work"; mkdir -p "$work"   # new inputs found this run
  dict=""; [ -f "$B/$t.dict" ] && dict="-dict=$B/$t.dict"
  maxlen=4096; case $t in dckpt|dckpt_meta) maxlen=16384 ;; esac
  runs=""; [ -n "${FUZZ_RUNS:-}" ] && runs="-runs=$FUZZ_RUNS"
  t0=$(date +%s.%N)
  fresh_scratch
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
[ -z "${FUZZ_SCRATCH:-}" ] || rm -rf "$FUZZ_SCRATCH"
[ $fails -eq 0 ]
