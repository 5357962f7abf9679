#!/usr/bin/env bash
# tests/integration/test_plan_agree.sh — the planner and the trainer apply the
# same configuration checks (config/config_check.c through mt_config_load):
#  1. for several configs x world sizes, every layout `megatrain plan --sweep`
#     lists is accepted by `megatrain topology` (the trainer's config + group
#     checks, without training);
#  2. a layout the trainer refuses (zero_stage 2 with pipeline parallelism) is
#     refused by `plan`, `topology` and `train` with the same message, exit 2,
#     and --sweep never lists one; MoE on device cuda is accepted by both.
set -u
cd "$(dirname "$0")/../.."
bin="${MEGATRAIN:-./megatrain}"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
py=/usr/bin/python3
fails=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails+1)); }

# sets SWEEP_JSON: one line of --set arguments per layout of the sweep's JSON:
# the layout's own "set" list, after checking that it says what the layout
# fields say (a layout key the layout does not use is left out or null: given,
# it would be refused as a key without effect)
sets() {
  $py - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for L in j["layouts"]:
    l, s = L["layout"], L["set"]
    kv = dict(x.split("=", 1) for x in s)
    want = {"parallel.tensor_model_parallel_size": str(l["tp"]),
            "parallel.pipeline_model_parallel_size": str(l["pp"]),
            "parallel.virtual_pipeline_model_parallel_size": str(l["vpp"]) if l["pp"] > 1 else "null",
            "parallel.context_parallel_size": str(l["cp"]),
            "parallel.sequence_parallel": "true" if l["sequence_parallel"] else "false",
            "parallel.zero_stage": str(l["zero_stage"]),
            "training.micro_batch_size": str(l["micro_batch_size"]),
            "model.recompute_granularity": "null" if l["recompute"] == "none" else '"%s"' % l["recompute"]}
    if "parallel.expert_model_parallel_size" in kv:
        want["parallel.expert_model_parallel_size"] = str(l["ep"])
        want["parallel.expert_tensor_parallel_size"] = str(l["etp"])
    for k, v in want.items():
        assert kv.get(k) == v, "layout %s: set %s=%s, layout says %s" % (l, k, kv.get(k), v)
    print(" ".join("--set '%s'" % x for x in s))
PY
}

# 1. every listed layout is accepted by the trainer's checks
for cw in "configs/papers/narayanan21-18b.json 64" "configs/papers/narayanan21-1.7b.json 32" \
          "configs/gpt-moe.json 8"; do
  set -- $cw
  cfg=$1 world=$2 name=$(basename "$1" .json)@$2
  [ -f "$cfg" ] || { echo "skip $name (no $cfg)"; continue; }
  if ! "$bin" plan --config "$cfg" --world-size "$world" --hardware h100-sxm --sweep --top 20 \
       --json >"$tmp/sj" 2>"$tmp/se"; then
    bad "$name: sweep failed"; head -3 "$tmp/se"; continue
  fi
  sets "$tmp/sj" >"$tmp/sets" || { bad "$name: sweep JSON"; continue; }
  n=0 refused=0 zpp=0
  while read -r line; do
    n=$((n+1))
    if ! eval "\"$bin\" topology --config \"$cfg\" --world-size $world $line" >/dev/null 2>"$tmp/te"; then
      refused=$((refused+1)); echo "     | refused: $line: $(head -1 "$tmp/te")"
    fi
    case "$line" in *pipeline_model_parallel_size=1\'*) ;;
      *zero_stage=[23]*) zpp=$((zpp+1)) ;; esac
  done <"$tmp/sets"
  if [ "$n" -gt 0 ] && [ "$refused" -eq 0 ] && [ "$zpp" -eq 0 ]; then
    ok "$name: all $n listed layouts accepted by the trainer's checks"
  else
    bad "$name: $refused of $n listed layouts refused, $zpp with zero_stage >= 2 and pp > 1"
  fi
done

# 2. a refused layout: same message from plan, topology and train
cfg=configs/papers/narayanan21-18b.json
Z="--set parallel.zero_stage=2 --set parallel.pipeline_model_parallel_size=2"
# shellcheck disable=SC2086
"$bin" plan --config $cfg --world-size 64 --hardware h100-sxm $Z >/dev/null 2>"$tmp/p"; rp=$?
# shellcheck disable=SC2086
"$bin" topology --config $cfg --world-size 64 $Z >/dev/null 2>"$tmp/t"; rt=$?
msg_p=$(sed -n 's/^megatrain[a-z ]*: error: //p' "$tmp/p" | head -1)
msg_t=$(sed -n 's/^megatrain[a-z ]*: error: //p' "$tmp/t" | head -1)
if [ $rp -eq 2 ] && [ $rt -eq 2 ] && [ -n "$msg_p" ] && [ "$msg_p" = "$msg_t" ] &&
   grep -q "parallel.zero_stage" "$tmp/p"; then
  ok "zero2+pp2 refused by plan and topology alike: $msg_p"
else
  bad "zero2+pp2: plan rc $rp '$msg_p', topology rc $rt '$msg_t'"
fi

# MoE on cuda (refused before issue 19): plan and topology both accept it
"$bin" plan --config configs/gpt-moe.json --world-size 8 --hardware h100-sxm --set device=cuda \
  >/dev/null 2>"$tmp/mp"; rp=$?
"$bin" topology --config configs/gpt-moe.json --world-size 8 --set device=cuda >/dev/null 2>"$tmp/mt"; rt=$?
if [ $rp -eq 0 ] && [ $rt -eq 0 ]; then
  ok "MoE on cuda accepted by plan and topology alike"
else
  bad "MoE on cuda: plan rc $rp '$(head -1 "$tmp/mp")', topology rc $rt '$(head -1 "$tmp/mt")'"
fi

# the trainer itself (2 ranks: the refusal comes from the config check, before any data)
if command -v mpirun >/dev/null; then
  export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # shellcheck disable=SC2086
  timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" --config configs/gpt-tiny.json $Z \
    >/dev/null 2>"$tmp/tr"; rr=$?
  "$bin" topology --config configs/gpt-tiny.json --world-size 2 $Z >/dev/null 2>"$tmp/t2"
  msg_t2=$(sed -n 's/^megatrain[a-z ]*: error: //p' "$tmp/t2" | head -1)
  if [ $rr -eq 2 ] && [ -n "$msg_t2" ] && grep -qF -- "$msg_t2" "$tmp/tr"; then
    ok "zero2+pp2 refused by train (exit 2) with topology's message"
  else
    bad "zero2+pp2: train rc $rr"; head -3 "$tmp/tr"
  fi
fi

if [ $fails -ne 0 ]; then echo "$fails case(s) failed"; exit 1; fi
echo "planner and trainer agree"
