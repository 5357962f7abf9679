#!/usr/bin/env bash
# Checkpoints and generation across the cpu backend and the CUDA backend
# under the host emulation (build-emu/, make CUDA_EMU=1):
#   - a checkpoint written by a cuda-emu run (dp=2 ZeRO-1 on the NCCL
#     stand-in, fp32, dropout on) at step 2 resumes on cpu in one process:
#     steps 3-4 equal the uninterrupted cpu run's within 1e-4 relative;
#   - a checkpoint written on cpu at step 2 resumes on cuda-emu (one
#     process): steps 3-4 within 1e-4 of the uninterrupted cpu run;
#   - `megatrain generate --device cuda` on cuda-emu gives the cpu backend's
#     greedy tokens (24 new) for a model trained on cpu;
#   - the same for multi-latent attention (tests/configs/gpt-mla-test.json:
#     the latent KV cache's gather tables, RoPE, up-projection and the flash
#     kernels with hv != hn on the device), 12 new tokens: fp32 tokens equal
#     and logits within 1e-5 of the largest |logit|; bf16 (a bf16-trained
#     checkpoint) tokens equal and logits within 2e-2 up to the first step
#     where cpu's two best logits are closer than twice the logits'
#     difference (rounding may then pick either; the step is printed). CI
#     runs the KV cache on cuda; MEGATRAIN_TEST_FULL=1 adds --no-kv-cache and
#     --mla-absorb (weight absorption) on cuda in both precisions.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
source "$(dirname "$0")/cuda_emu_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
t_start=$(date +%s)
S=(--config "$CFG" --set model.num_layers=2 --set model.seq_length=16 --set training.global_batch_size=4
   --set training.micro_batch_size=1 --set training.lr_warmup_iters=1 --set training.lr_decay_iters=6
   --set training.eval_interval=0 --set logging.log_interval=1)
fails=0

echo "== the uninterrupted cpu run, 4 steps"
emu_run cpu4 1 "$MT" cpu "${S[@]}" --set training.train_iters=4 || exit 1

echo "== cuda-emu (dp=2 ZeRO-1, NCCL stand-in) saves at step 2, cpu resumes"
emu_run emu_save 2 "$EMU_MT" cuda "${S[@]}" --set training.train_iters=2 --set parallel.zero_stage=1 \
  --set parallel.distributed_backend=nccl --set checkpoint.save="$TMP/ck_emu" --set checkpoint.save_interval=2 || exit 1
emu_run cpu_resume 1 "$MT" cpu "${S[@]}" --set training.train_iters=4 --set checkpoint.load="$TMP/ck_emu" || exit 1
grep -q "iteration        1/" "$TMP/cpu_resume.log" && { echo "the cpu run did not resume (it ran step 1)"; fails=1; }
compare_resumed "$TMP/cpu4.jsonl" "$TMP/cpu_resume.jsonl" 3 4 1e-4 "cuda-emu checkpoint resumed on cpu:" || fails=1

echo "== cpu saves at step 2, cuda-emu resumes"
emu_run cpu_save 1 "$MT" cpu "${S[@]}" --set training.train_iters=2 --set checkpoint.save="$TMP/ck_cpu" \
  --set checkpoint.save_interval=2 || exit 1
emu_run emu_resume 1 "$EMU_MT" cuda "${S[@]}" --set training.train_iters=4 --set checkpoint.load="$TMP/ck_cpu" || exit 1
grep -q "iteration        1/" "$TMP/emu_resume.log" && { echo "the cuda-emu run did not resume (it ran step 1)"; fails=1; }
compare_resumed "$TMP/cpu4.jsonl" "$TMP/emu_resume.jsonl" 3 4 1e-4 "cpu checkpoint resumed on cuda-emu:" || fails=1

echo "== generate: greedy tokens on cuda-emu equal cpu's"
TOK=(--set data.vocab_file=$SHARED/gpt2-vocab.json --set data.merge_file=$SHARED/gpt2-merges.txt)
emu_run gen_train 1 "$MT" cpu "${S[@]}" --set training.train_iters=6 --set model.init_method_std=0.2 \
  --set model.max_position_embeddings=64 --set checkpoint.save="$TMP/ck_gen" "${TOK[@]}" || exit 1
PROMPT="First Citizen: Before we proceed any further, hear me"
for d in cpu cuda; do
  bin=$MT; [ $d = cuda ] && bin=$EMU_MT
  timeout 600 "$bin" generate --load "$TMP/ck_gen" --prompt "$PROMPT" --max-new-tokens 24 \
    --temperature 0 --print-ids --device $d >"$TMP/gen_$d.out" 2>"$TMP/gen_$d.err" ||
    { echo "generate on $d failed:"; tail -5 "$TMP/gen_$d.err"; exit 1; }
done
a=$(grep '^ids:' "$TMP/gen_cpu.out"); b=$(grep '^ids:' "$TMP/gen_cuda.out")
if [ -n "$a" ] && [ "$a" = "$b" ]; then
  echo "   greedy tokens equal: $(wc -w <<< "${a#ids: }") ids"
else
  echo "   greedy tokens differ:"; echo "   cpu:  $a"; echo "   cuda: $b"; fails=1
fi
echo "== generate, multi-latent attention: cuda-emu = cpu (fp32, bf16)"
PY=${PY:-/usr/bin/python3}
# agree NAME A.f32 B.f32 A.out B.out N TOL: B's greedy tokens and logits
# against A's (the cpu run's): logits within TOL of A's largest |logit| and
# the same tokens at each step, until a step whose two best logits of A are
# closer than twice the logits' difference (then either pick is right and
# the continuations part: the rest is not compared)
agree() {
  $PY - "$@" <<'PYEOF'
import sys, numpy as np
name, fa, fb, oa, ob, n, tol = sys.argv[1:8]
n, tol = int(n), float(tol)
ids = lambda p: [l.split()[1:] for l in open(p) if l.startswith("ids:")][0]
ia, ib = ids(oa), ids(ob)
a, b = (np.fromfile(f, dtype=np.float32).reshape(n, -1) for f in (fa, fb))
k0 = len(ia) - n  # prompt length
worst, upto = 0.0, n
for t in range(n):
    d, m = float(np.abs(a[t] - b[t]).max()), float(np.abs(a[t]).max())
    worst = max(worst, d / m)
    if d > tol * m:
        sys.exit("%s: step %d: max |logit diff| %.3g is above %g of %.3g" % (name, t, d, tol, m))
    top = np.sort(a[t])[-2:]
    if ib[k0 + t] != ia[k0 + t]:
        if top[1] - top[0] <= 2 * d:
            upto = t
            break
        sys.exit("%s: step %d: token %s, expected %s (margin %.3g, logits differ by %.3g)"
                 % (name, t, ib[k0 + t], ia[k0 + t], top[1] - top[0], d))
print("   %s: tokens equal for %d of %d steps%s, worst |logit diff| %.1e of the largest"
      % (name, upto, n, "" if upto == n else " (step %d: a tie within rounding, margin %.3g)"
         % (upto, float(np.diff(np.sort(a[upto])[-2:])[0])), worst))
PYEOF
}
MLA=(--config tests/configs/gpt-mla-test.json --set training.train_iters=4 --set training.eval_interval=0
     --set model.init_method_std=0.2 --set model.max_position_embeddings=64 "${TOK[@]}")
for prec in fp32 bf16; do
  emu_run mla_train_$prec 1 "$MT" cpu "${MLA[@]}" --set training.precision=$prec \
    --set checkpoint.save="$TMP/ck_mla_$prec" || exit 1
  runs="cpu cuda"; [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] && runs="cpu cuda cuda_nokv cuda_absorb"
  for r in $runs; do
    bin=$MT; d=cpu; nk=(); [ $r != cpu ] && { bin=$EMU_MT; d=cuda; }
    [ $r = cuda_nokv ] && nk=(--no-kv-cache)
    [ $r = cuda_absorb ] && nk=(--mla-absorb)
    timeout 600 "$bin" generate --load "$TMP/ck_mla_$prec" --prompt "First Citizen: Before we proceed" \
      --max-new-tokens 12 --temperature 0 --print-ids --device $d "${nk[@]}" \
      --dump-logits "$TMP/mla_$prec.$r.f32" >"$TMP/mla_$prec.$r.out" 2>"$TMP/mla_$prec.$r.err" ||
      { echo "MLA generate ($prec, $r) failed:"; tail -5 "$TMP/mla_$prec.$r.err"; exit 1; }
    [ $r = cpu ] && continue
    tol=2e-2; [ $prec = fp32 ] && tol=1e-5
    agree "MLA $prec $r vs cpu" "$TMP/mla_$prec.cpu.f32" "$TMP/mla_$prec.$r.f32" \
      "$TMP/mla_$prec.cpu.out" "$TMP/mla_$prec.$r.out" 12 $tol || fails=1
    if [ $prec = fp32 ] && [ "$(grep '^ids:' "$TMP/mla_$prec.$r.out")" != "$(grep '^ids:' "$TMP/mla_$prec.cpu.out")" ]; then
      echo "   MLA fp32 $r: tokens differ from cpu's"; fails=1
    fi
  done
done
dt=$(( $(date +%s) - t_start ))
[ $fails = 0 ] || { echo "FAILED (${dt} s)"; exit 1; }
echo "checkpoints cross-resume cuda-emu <-> cpu and generate agrees (${dt} s)"
