#!/usr/bin/env bash
# tests/integration/test_data_fuzz.sh — short libFuzzer run (15 s per target)
# of the MMIDIDX index reader and the JSON-lines reader + tokenizer; longer
# runs: bash tests/fuzz/run_fuzz.sh 600.
cd "$(dirname "$0")/../.."
exec bash tests/fuzz/run_fuzz.sh "${MEGATRAIN_FUZZ_SECONDS:-15}"
