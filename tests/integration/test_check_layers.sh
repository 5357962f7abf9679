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
# 3. inside a folder: a planted pair of source files in trainer/ of the tree
#    copy that call each other, and in the synthetic tree two headers that
#    include each other and three source files calling around a circle, are
#    each reported as a file cycle naming every edge (exit 1).
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

# ---- 3. file cycles inside a folder ----
printf '%s\n' 'void mt_zz_cyc_b(int n);' 'void mt_zz_cyc_a(int n) { if (n) mt_zz_cyc_b(n - 1); }' >"$T/trainer/zz_cyc_a.c"
printf '%s\n' 'void mt_zz_cyc_a(int n);' 'void mt_zz_cyc_b(int n) { if (n) mt_zz_cyc_a(n - 1); }' >"$T/trainer/zz_cyc_b.c"
rc=0; $PY "$CHECK" --root "$T" >"$TMP/cyc1.out" || rc=$?
[ $rc -eq 1 ] || fail "planted call cycle: exit $rc, expected 1"
grep -F 'trainer/zz_cyc_a.c: file cycle inside folder trainer: zz_cyc_a.c -> zz_cyc_b.c -> zz_cyc_a.c (trainer/zz_cyc_a.c:2: calls mt_zz_cyc_b; trainer/zz_cyc_b.c:2: calls mt_zz_cyc_a)' "$TMP/cyc1.out" \
  || { cat "$TMP/cyc1.out"; fail "the planted trainer/ call cycle is not reported"; }
sed -i '/^low: top$/d' "$S/scripts/layers.txt"; echo 'low:' >>"$S/scripts/layers.txt"
rm -f "$S/low/up.c"
printf '%s\n' '#include "low/hb.h"' >"$S/low/ha.h"
printf '%s\n' '#include "ha.h"' >"$S/low/hb.h"
printf '%s\n' 'int mt_low_q(int);' 'int mt_low_p(int n) { return n ? mt_low_q(n - 1) : 0; }' >"$S/low/p.c"
printf '%s\n' 'int mt_low_r(int);' 'int mt_low_q(int n) { return n ? mt_low_r(n - 1) : 0; }' >"$S/low/q.c"
printf '%s\n' 'int mt_low_p(int);' 'int mt_low_r(int n) { return n ? mt_low_p(n - 1) : 0; }' >"$S/low/r.c"
rc=0; $PY "$CHECK" --root "$S" >"$TMP/cyc2.out" || rc=$?
cat "$TMP/cyc2.out"
[ $rc -eq 1 ] || fail "synthetic file cycles: exit $rc, expected 1"
grep -qF 'low/ha.h: file cycle inside folder low: ha.h -> hb.h -> ha.h (low/ha.h:1: include "low/hb.h"; low/hb.h:1: include "ha.h")' "$TMP/cyc2.out" \
  || fail "the header include cycle is not reported"
grep -qF 'low/p.c: file cycle inside folder low: p.c -> q.c -> r.c -> p.c' "$TMP/cyc2.out" \
  || fail "the three-file call cycle is not reported"
echo "ok: file cycles inside a folder reported (planted trainer/ call pair, header pair, three-file call circle)"
