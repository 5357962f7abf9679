#!/usr/bin/env bash
# The dead-function check (scripts/check-dead.py, `make check-dead`) can fail:
# on a copy of this tree it exits 0 (as CI's `make check-dead` on the tree
# itself), and with three planted functions it exits 1 and lists exactly the
# two that have no caller outside tests/: a model/ function nobody calls and
# a core/ function only a test calls; a third, called from trainer/, is not
# listed, nor is a static function or a prototype.
set -eu
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: $PY not found"; exit 77; }
CHECK=$PWD/scripts/check-dead.py
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
T=$TMP/tree
mkdir -p "$T/scripts"
cp scripts/layers.txt "$T/scripts/"
find . \( -path ./.git -o -path './build*' -o -path ./node_modules \) -prune -o \
     \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f -print0 |
  tar --null -T - -cf - | tar -C "$T" -xf -
rc=0; $PY "$CHECK" --root "$T" >"$TMP/clean.out" || rc=$?
[ $rc -eq 0 ] || { cat "$TMP/clean.out"; fail "the unplanted copy: exit $rc, expected 0"; }
printf '%s\n' '/* planted */' 'int mt_zz_dead_model_fn(void) { return 1; }' \
  'static int mt_zz_static_fn(void) { return 2; }' 'int mt_zz_used_fn(void) { return mt_zz_static_fn(); }' \
  >"$T/model/zz_planted.c"
printf '%s\n' '/* planted */' 'int mt_zz_dead_model_fn(void);' 'int mt_zz_used_fn(void);' >"$T/model/zz_planted.h"
printf '%s\n' '/* planted */' 'int mt_zz_test_only_fn(void) { return 3; }' >"$T/core/zz_planted.c"
printf '%s\n' '#include "model/zz_planted.h"' \
  'static int mt_zz_trainer_caller(void) { return mt_zz_used_fn(); }' >>"$T/trainer/train.c"
mkdir -p "$T/tests/unit"
printf '%s\n' 'int mt_zz_test_only_fn(void);' 'int main(void) { return mt_zz_test_only_fn(); }' \
  >"$T/tests/unit/test_zz_planted.c"
rc=0; $PY "$CHECK" --root "$T" >"$TMP/planted.out" || rc=$?
cat "$TMP/planted.out"
[ $rc -eq 1 ] || fail "planted tree: exit $rc, expected 1"
grep -q '^model/zz_planted.c:2: mt_zz_dead_model_fn is exported but nothing outside tests/ calls it$' "$TMP/planted.out" ||
  fail "the uncalled model function is not listed"
grep -q '^core/zz_planted.c:2: mt_zz_test_only_fn is exported but nothing outside tests/ calls it$' "$TMP/planted.out" ||
  fail "the test-only core function is not listed"
grep -q 'mt_zz_used_fn\|mt_zz_static_fn' "$TMP/planted.out" && fail "a called or static function is listed"
n=$(grep -c ' is exported but nothing outside tests/ calls it$' "$TMP/planted.out")
[ "$n" -eq 2 ] || fail "$n functions listed, expected exactly the 2 planted ones"
echo "PASS: check-dead passes the tree and lists exactly the 2 planted dead functions"
