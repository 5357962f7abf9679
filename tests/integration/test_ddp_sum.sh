#!/usr/bin/env bash
# parallel/ddp.c's bucketed all-reduce on 3 ranks (tests/unit/parallel/
# test_ddp.c run under mpirun): a dense range over the world and an expert
# range over ranks {0, 2}, bucket sizes 1, 5, 7 and whole ranges, every
# element bitwise equal to the exact sum, one all-reduce counted per bucket.
set -eu
cd "$(dirname "$0")/../.."
B=build/tests/test_ddp
[ -x $B ] || { echo "FAIL: $B not built (make tests)"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
timeout 300 mpirun -np 3 --oversubscribe $B
