#!/usr/bin/env bash
# NCCL is loaded at run time (parallel/nccl_api.c), never linked, so the
# MPI and staging engines run where NCCL is missing:
#  1. no binary the Makefile built (./megatrain, build/tests/test_*,
#     build/tests/tools/*, build/bench/*) has libnccl in its NEEDED entries;
#  2. with every copy of libnccl.so.2 hidden (an empty file bind-mounted over
#     it in a private mount namespace; SKIP where unshare -m does not work):
#     - a 2-rank CPU training (MPI engine) runs its 3 iterations;
#     - comm_fail nccl on 2 ranks (an NCCL group of 2, no backend: a group
#       that will call NCCL loads it before it looks for a GPU) ends the job
#       with exit status 1 and the load message: what was tried, the
#       loader's reason, the fix;
#     - comm_check --engine nccl creates the cuda backend before any group,
#       so it fails with the no-GPU message on a machine without a GPU, and
#       with the load message on one with a GPU.
# A CPU-only build (CUDA=0) has no NCCL engine: SKIP.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
command -v readelf >/dev/null || { echo "SKIP: readelf not found"; exit 77; }
readelf -d "$MT" | grep -q 'NEEDED.*libcudart' || { echo "SKIP: CPU-only build (no NCCL engine)"; exit 77; }
for b in build/tests/tools/comm_fail build/tests/tools/comm_check; do
  [ -x $b ] || { echo "SKIP: $b not built (make tests)"; exit 77; }
done

echo "== NEEDED entries"
n=0; bad=0
for f in "$MT" build/tests/test_* build/tests/tools/* build/bench/*; do
  [ -f "$f" ] && [ -x "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  n=$((n + 1))
  if readelf -d "$f" | grep -q 'NEEDED.*libnccl'; then echo "links NCCL: $f"; bad=1; fi
done
[ $n -ge 10 ] || { echo "only $n binaries found"; exit 1; }
[ $bad = 0 ] || exit 1
echo "ok   none of $n binaries needs libnccl"

unshare -m --propagation private true 2>/dev/null || { echo "SKIP: unshare -m unavailable (NEEDED checked)"; exit 77; }
# every file the loader could find as libnccl.so.2: the ldconfig cache, the
# binaries' run path, LD_LIBRARY_PATH
cands=$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF}')
for d in $(readelf -d "$MT" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p' | tr : ' ') $(tr : " " <<< "${LD_LIBRARY_PATH:-}"); do
  cands="$cands $d/libnccl.so.2"
done
: > "$TMP/empty"; hide=""; hidden=""
for c in $cands; do
  r=$(readlink -f "$c" 2>/dev/null) && [ -f "$r" ] || continue
  grep -qxF "$r" <<< "$hidden" && continue
  hidden="$hidden"$'\n'"$r"; hide="$hide mount --bind $TMP/empty $r &&"
done
[ -n "$hide" ] || echo "(no libnccl.so.2 on this machine: nothing to hide)"
echo "hidden:$hidden"

cat > "$TMP/inner.sh" <<EOF
set -u
MPIRUN="mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x OMPI_MCA_mpi_yield_when_idle"
echo "== training"
\$MPIRUN "$MT" --config $CFG --set device=cpu --set training.train_iters=3 --set training.lr_warmup_iters=1 \
  --set training.eval_interval=0 --set logging.log_interval=1 > "$TMP/train.log" 2>&1; echo "train rc \$?"
echo "== comm_fail nccl"
timeout 90 \$MPIRUN build/tests/tools/comm_fail nccl > "$TMP/fail.log" 2>&1; echo "fail rc \$?"
echo "== comm_check --engine nccl"
timeout 90 \$MPIRUN build/tests/tools/comm_check --engine nccl > "$TMP/check.log" 2>&1; echo "check rc \$?"
EOF
unshare -m --propagation private bash -c "$hide bash $TMP/inner.sh" > "$TMP/inner.log" 2>&1
cat "$TMP/inner.log"
rc=0
grep -q '^train rc 0$' "$TMP/inner.log" && [ "$(grep -cE 'iteration +[0-9]+/ +3 .*lm loss' "$TMP/train.log")" = 3 ] &&
  grep -q 'communication: mpi' "$TMP/train.log" &&
  echo "ok   2-rank CPU training without libnccl: 3 iterations" ||
  { echo "FAIL 2-rank CPU training without libnccl"; tail -20 "$TMP/train.log"; rc=1; }

want='parallel.distributed_backend "nccl": cannot load libnccl.so.2 (.*); put NCCL'"'"'s lib folder on LD_LIBRARY_PATH, or set parallel.distributed_backend to "mpi" (staged through host memory)$'
grep -q '^fail rc 1$' "$TMP/inner.log" && grep -q "$want" "$TMP/fail.log" &&
  echo "ok   comm_fail nccl: exit 1, $(grep -m1 -o 'cannot load libnccl.so.2 ([^)]*)' "$TMP/fail.log")" ||
  { echo "FAIL comm_fail nccl: want exit 1 and the load message"; tail -20 "$TMP/fail.log"; rc=1; }

if grep -q "$want" "$TMP/check.log"; then
  echo "ok   comm_check --engine nccl: the load message (a GPU is present)"
elif grep -q 'comm_check --engine nccl: .*CUDA' "$TMP/check.log"; then
  echo "ok   comm_check --engine nccl: no GPU, reported before NCCL is needed: $(grep -m1 -o 'comm_check --engine nccl: .*' "$TMP/check.log")"
else
  echo "FAIL comm_check --engine nccl: neither the load message nor the no-GPU message"; tail -20 "$TMP/check.log"; rc=1
fi
grep -q '^check rc 0$' "$TMP/inner.log" && { echo "FAIL comm_check --engine nccl succeeded without NCCL"; rc=1; }
exit $rc
