#!/usr/bin/env bash
# bench/fuzz.sh SECONDS [TARGET...] — open-ended fuzzing of every reader
# (libFuzzer + ASan/UBSan; CI runs the deterministic short form,
# tests/integration/test_data_fuzz.sh): build each target, replay
# tests/fuzz/regress/, run each for SECONDS (one after another) with a random
# seed and print per target: seconds, executions, exec/s, crashes (0/1) and
# the reproducer path. RUNS=N stops a target after N executions instead
# (SECONDS is then the upper bound), e.g. the closing check of issues 18 and
# 26:  RUNS=1000000 nice bash bench/fuzz.sh 14400
# A crash: add the reproducer to tests/fuzz/regress/TARGET/ with the fix.
# Targets: mmidx jsonl dckpt dckpt_meta legacy config hw safetensors (default all);
# tests/fuzz/run_fuzz.sh describes each. Exit 1 on a crash (replay the
# reproducer with build/fuzz/fuzz_TARGET FILE), 77 without clang/libFuzzer.
set -u
[ $# -ge 1 ] || { echo "usage: bench/fuzz.sh SECONDS [TARGET...]" >&2; exit 2; }
case "$1" in ''|*[!0-9]*) echo "bench/fuzz.sh: SECONDS must be a positive integer, got '$1'" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
FUZZ_RUNS="${RUNS:-}" exec bash tests/fuzz/run_fuzz.sh "$@"
