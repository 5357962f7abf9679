#!/usr/bin/env bash
# Checkpoints and generation across the cpu backend and the CUDA backend
# under the host emulation (build-emu/, make CUDA_EMU=1):
#   - a checkpoint written by a cuda-emu run (dp=2 ZeRO-1 on the NCCL
#     stand-in, fp32, dropout on) at step 2 resumes on cpu in one process:
#     steps 3-4 equal the uninterrupted cpu run's within 1e-4 relative;
#   - a checkpoint written on cpu at step 2 resumes on cuda-emu (one
#     process): steps 3-4 within 1e-4 of the uninterrupted cpu run;
#   - `megatrain generate --device cuda` on cuda-emu gives the cpu backend's
#     greedy tokens (24 new) for a model trained on cpu.
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
dt=$(( $(date +%s) - t_start ))
[ $fails = 0 ] || { echo "FAILED (${dt} s)"; exit 1; }
echo "checkpoints cross-resume cuda-emu <-> cpu and generate agrees (${dt} s)"
