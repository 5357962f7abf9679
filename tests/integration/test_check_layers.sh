#!/usr/bin/env bash
# The layering check (scripts/check-layers.py, `make check-layers`) can fail:
# 1. on a copy of this tree with planted violations (a model/ file that
#    includes a trainer/ header and <mpi.h> and calls a function defined in
#    cpu/) it exits 1 and reports exactly the planted lines, file:line and
#    edge, on top of whatever the unplanted copy reports; uses of the same
#    names in a comment or a string and an allowed model -> core call are not
#    reported;
# 2. on a small synthetic tree it passes (exit 0) when the edges are kept,
#    honours header-only (dir/GLOB), symbol-only (dir:GLOB) and restricted
#    system header (<mpi.h>) edges, finds definitions inside extern "C"
#    blocks, fails on a folder the edges file does not list and refuses
#    (exit 2) an edges file with a cycle.
# Whether the real tree passes is `make check-layers`' business (CI runs it).
set -eu
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: $PY not found"; exit 77; }
CHECK=$PWD/scripts/check-layers.py
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. planted violations in a copy of the tree ----
T=$TMP/tree
mkdir -p "$T/scripts"
cp scripts/layers.txt "$T/scripts/"
find . \( -path ./.git -o -path './build*' \) -prune -o \
     \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f -print0 |
  tar --null -T - -cf - | tar -C "$T" -xf -
rc=0; $PY "$CHECK" --root "$T" >"$TMP/before.out" || rc=$?
[ $rc -le 1 ] || { cat "$TMP/before.out"; fail "checker error (exit $rc) on the unplanted copy"; }
echo "unplanted copy: exit $rc, $(grep -c ' not allowed$' "$TMP/before.out" || true) violation(s)"
mkdir -p "$T/model" "$T/trainer" "$T/cpu" "$T/core"
printf '%s\n' '/* planted: a trainer-level header */' 'void mt_zz_planted_trainer_fn(void);' \
  >"$T/trainer/zz_planted.h"
printf '%s\n' '/* planted: a cpu function */' 'void mt_zz_planted_cpu_fn(void) {}' \
  >"$T/cpu/zz_planted.c"
printf '%s\n' '/* planted: a core function */' 'int mt_zz_planted_core_fn(int x) { return x; }' \
  >"$T/core/zz_planted.c"
cat >"$T/model/zz_planted.c" <<'EOF'
/* planted by test_check_layers.sh: mt_zz_planted_cpu_fn() in a comment */
#include <mpi.h>
#include "trainer/zz_planted.h"
static const char *note = "mt_zz_planted_cpu_fn() in a string";
int mt_zz_planted_model_fn(void);
int mt_zz_planted_model_fn(void) {
  (void)note;
  mt_zz_planted_cpu_fn();
  return mt_zz_planted_core_fn(1);
}
EOF
rc=0; $PY "$CHECK" --root "$T" >"$TMP/after.out" || rc=$?
cat "$TMP/after.out"
[ $rc -eq 1 ] || fail "planted violations: exit $rc, expected 1"
grep ' not allowed$' "$TMP/before.out" | sort >"$TMP/b" || true
grep ' not allowed$' "$TMP/after.out" | sort >"$TMP/a" || true
comm -13 "$TMP/b" "$TMP/a" >"$TMP/new"
cat >"$TMP/want" <<'EOF'
model/zz_planted.c:2: folder model -> <mpi.h> (restricted system header) not allowed
model/zz_planted.c:3: folder model -> folder trainer (include "trainer/zz_planted.h") not allowed
model/zz_planted.c:8: folder model -> folder cpu (symbol mt_zz_planted_cpu_fn) not allowed
EOF
diff -u "$TMP/want" "$TMP/new" || fail "new violations differ from the planted ones"
[ -z "$(comm -23 "$TMP/b" "$TMP/a")" ] || fail "planting removed other violations"
echo "ok: the three planted violations reported with file:line, nothing else new"

# ---- 2. synthetic tree ----
S=$TMP/syn
mkdir -p "$S/top" "$S/low" "$S/gpu" "$S/scripts" "$S/tests"
cat >"$S/scripts/layers.txt" <<'EOF'
skip: tests
restricted: <mpi.h>
main: top
top:  low gpu/gpu_check.h gpu:mt_gpu_select*
low:
gpu:  low <mpi.h>
EOF
printf '%s\n' 'int mt_low_fn(void);' >"$S/low/low.h"
printf '%s\n' '#include "low.h"' 'int mt_low_fn(void) { return 1; }' >"$S/low/low.c"
printf '%s\n' '#define GPU_CHECK(x) (x)' >"$S/gpu/gpu_check.h"
printf '%s\n' '#include <mpi.h>' '#include <stdio.h>' '#ifdef __cplusplus' 'extern "C" {' '#endif' \
  'int mt_gpu_select_device(int r) { return r; }' 'int mt_gpu_other(void) { return 0; }' \
  '#ifdef __cplusplus' '}' '#endif' >"$S/gpu/gpu.cu"
printf '%s\n' '#include "../low/low.h"' '#include "gpu/gpu_check.h"' 'int mt_gpu_select_device(int r);' \
  'int mt_top_fn(void) { return GPU_CHECK(mt_gpu_select_device(mt_low_fn())); }' >"$S/top/top.c"
printf '%s\n' 'int mt_top_fn(void);' 'int main(void) { return mt_top_fn(); }' >"$S/main.c"
printf '%s\n' '#include "gpu/gpu.h"' 'int x(void) { return mt_gpu_other(); }' >"$S/tests/t.c"
$PY "$CHECK" --root "$S" || fail "synthetic tree that keeps its edges: expected exit 0"
printf '%s\n' '#include "../gpu/gpu_check.h"' '#include <mpi.h>' 'int mt_top_more(void) {' '  return mt_gpu_other(); }' \
  >"$S/top/more.c"
printf '%s\n' 'int mt_low_fn(void);' >"$S/top/up.h"
printf '%s\n' '#include "top/up.h"' >"$S/low/up.c"
mkdir -p "$S/extra"; printf '%s\n' 'int mt_extra(void) { return 0; }' >"$S/extra/e.c"
rc=0; $PY "$CHECK" --root "$S" >"$TMP/syn.out" || rc=$?
cat "$TMP/syn.out"
[ $rc -eq 1 ] || fail "synthetic violations: exit $rc, expected 1"
for want in 'top/more.c:4: folder top -> folder gpu (symbol mt_gpu_other) not allowed' \
            'top/more.c:2: folder top -> <mpi.h> (restricted system header) not allowed' \
            'low/up.c:1: folder low -> folder top (include "top/up.h") not allowed' \
            'extra/: folder extra has no entry in'; do
  grep -qF "$want" "$TMP/syn.out" || fail "missing: $want"
done
[ "$(grep -c 'not allowed$' "$TMP/syn.out")" -eq 3 ] || fail "expected exactly 3 violations"
echo 'low: top' >>"$S/scripts/layers.txt"; sed -i '/^low:$/d' "$S/scripts/layers.txt"
rc=0; $PY "$CHECK" --root "$S" 2>"$TMP/cyc.err" || rc=$?
cat "$TMP/cyc.err"
[ $rc -eq 2 ] && grep -q 'cycle' "$TMP/cyc.err" || fail "an edges file with a cycle: exit $rc, expected 2"
echo "ok: synthetic tree passes, partial edges honoured; violations, unlisted folder and cycle reported"
