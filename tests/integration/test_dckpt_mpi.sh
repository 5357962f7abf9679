#!/usr/bin/env bash
# tests/integration/test_dckpt_mpi.sh — the layout-free checkpoint format
# (checkpoint/dist_checkpoint.h) over MPI: 3 ranks save row / flat / column
# cuts (build/tests/tools/dckpt_check), 1, 2 and 4 ranks read them back
# under other cuts; the independent Python reader (tests/reference/
# dist_ckpt.py) reads the same files; a rank killed halfway through its
# shard file (MEGATRAIN_FAILPOINT) leaves the previous checkpoint latest and
# nothing published; a truncated shard file is refused by name.
set -u
cd "$(dirname "$0")/../.."
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL=build/tests/tools/dckpt_check
[ -x $TOOL ] || { echo "missing $TOOL (run make tests)"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPIRUN="timeout 120 mpirun --oversubscribe --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
set -e
$MPIRUN -np 3 $TOOL save "$TMP/ck" 3
for np in 1 2 4; do $MPIRUN -np $np $TOOL load "$TMP/ck"; done
ls "$TMP/ck/iter_0000003"
/usr/bin/python3 - "$TMP/ck" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tests/reference")
from dist_ckpt import load_checkpoint
meta, t = load_checkpoint(sys.argv[1])
assert meta["iteration"] == 3 and meta["seed"] == "18446744073709551557", meta
def val(i, r, c):
    return ((r * 131 + c * 7 + i * 17) % 255 - 127) / 8.0
for name, i in (("w", 1), ("e", 2), ("big", 3), ("z", 4)):
    a = t[name]
    r, c = np.meshgrid(np.arange(a.shape[0]), np.arange(a.shape[1]), indexing="ij")
    assert a.dtype == np.float32 and (a == val(i, r, c).astype(np.float32)).all(), name
n = t["n"]
assert n.dtype == np.int64 and (n[0] == np.arange(7) - 3).all(), n
print("python reader agrees (%d tensors)" % len(t))
PY
/usr/bin/python3 tests/reference/dist_ckpt.py dump "$TMP/ck"
set +e
MEGATRAIN_FAILPOINT=checkpoint_write:4 $MPIRUN -np 3 $TOOL save "$TMP/ck" 4 >"$TMP/crash.log" 2>&1; rc=$?
set -e
[ $rc -ne 0 ] || { echo "the failpoint did not kill the save"; exit 1; }
[ "$(cat "$TMP/ck/latest_checkpointed_iteration.txt")" = 3 ] || { echo "latest is not 3"; exit 1; }
[ ! -e "$TMP/ck/iter_0000004" ] || { echo "a half-written iter_0000004 was published"; exit 1; }
$MPIRUN -np 2 $TOOL load "$TMP/ck"
echo "killed save (exit $rc): iteration 3 stays latest and loads"
truncate -s 5000 "$TMP/ck/iter_0000003/shard_00001.bin"
set +e
out=$($MPIRUN -np 2 $TOOL load "$TMP/ck" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "shard_00001.bin' is truncated" <<<"$out" || { echo "truncation not refused: $out"; exit 1; }
echo "truncated shard refused: $(grep -m1 truncated <<<"$out")"
echo "test_dckpt_mpi OK"
