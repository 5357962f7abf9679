#!/usr/bin/env bash
# tests/integration/test_plan_cli.sh — `megatrain plan` from the command line:
# human table and --json for a paper config, --sweep ranks layouts that fit,
# and bad inputs (unknown hardware file, layout that cannot divide the world,
# missing arguments, bad --fp8-* flags) exit 2 with a message naming the
# problem; the --fp8-* flags add the FP8 line and JSON object.
set -u
cd "$(dirname "$0")/../.."
bin="${MEGATRAIN:-./megatrain}"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
py=/usr/bin/python3
fails=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails+1)); }

# 1. human table
"$bin" plan --config configs/papers/korthikanti22-175b.json --world-size 64 --hardware a100-80gb >"$tmp/out" 2>&1
if [ $? -eq 0 ] && grep -q "time per iteration" "$tmp/out" && grep -q "fits" "$tmp/out" && grep -q "MFU" "$tmp/out"; then ok table; else bad table; cat "$tmp/out"; fi

# 2. --json parses and carries every field
"$bin" plan --config configs/papers/korthikanti22-175b.json --world-size 64 --hardware configs/hardware/a100-80gb.json --json >"$tmp/j" 2>&1
if $py -c '
import json,sys
j=json.load(open(sys.argv[1]))
t=j["time"]; m=j["memory"]
assert j["layout"]["tp"]==8 and j["layout"]["pp"]==8 and j["layout"]["vpp"]==3
assert abs(t["iteration_s"]-13.75)/13.75 < 0.10, t["iteration_s"]
assert abs(sum(t["breakdown_s"].values())-t["iteration_s"]) < 1e-4*t["iteration_s"]
assert m["fits"] and abs(sum(m["bytes"].values())-m["total"]) < 2
for k in ("mfu","hfu","tokens_per_s","tflops_per_gpu"): assert t[k] > 0
' "$tmp/j"; then ok json; else bad json; cat "$tmp/j"; fi

# 3. --sweep: ranked, the first row fits, json variant parses
"$bin" plan --config configs/papers/narayanan21-18b.json --world-size 64 --hardware h100-sxm --sweep --top 5 >"$tmp/s" 2>&1
if [ $? -eq 0 ] && grep -q "valid layouts" "$tmp/s" && sed -n 3p "$tmp/s" | grep -q "yes$"; then ok sweep; else bad sweep; cat "$tmp/s"; fi
"$bin" plan --config configs/papers/narayanan21-18b.json --world-size 64 --hardware h100-sxm --sweep --top 3 --json >"$tmp/sj" 2>&1
if $py -c '
import json,sys
j=json.load(open(sys.argv[1])); L=j["layouts"]
assert len(L)==3 and j["fit"]>0
r=[x["time"]["tokens_per_s"] for x in L]; assert r==sorted(r,reverse=True)
' "$tmp/sj"; then ok sweep_json; else bad sweep_json; head -c 600 "$tmp/sj"; fi

# 4. bad inputs -> exit 2, message names the thing
expect2() { # name needle -- args
  local name="$1" needle="$2"; shift 3
  "$bin" plan "$@" >"$tmp/e" 2>&1; local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$needle" "$tmp/e"; then ok "$name"; else bad "$name (rc $rc)"; cat "$tmp/e"; fi
}
expect2 unknown_hw "no-such-gpu" -- --config configs/papers/korthikanti22-22b.json --world-size 8 --hardware no-such-gpu
expect2 world_div "world size 60" -- --config configs/papers/korthikanti22-175b.json --world-size 60 --hardware a100-80gb
expect2 missing_args "required" -- --config configs/papers/korthikanti22-22b.json
expect2 bad_world "world-size" -- --config configs/papers/korthikanti22-22b.json --world-size zero --hardware a100-80gb
expect2 bad_key "tensor_model_parallel_sise" -- --config configs/papers/korthikanti22-22b.json --world-size 8 --hardware a100-80gb --set parallel.tensor_model_parallel_sise=2
echo '{"name":"x","peak_tflops_bf16":312,"bogus":1}' >"$tmp/hw.json"
expect2 hw_key "peak_tflops_fp32" -- --config configs/papers/korthikanti22-22b.json --world-size 8 --hardware "$tmp/hw.json"

# 5. a layout that does not fit is flagged
"$bin" plan --config configs/papers/korthikanti22-175b.json --world-size 64 --hardware a100-80gb \
  --set 'model.recompute_granularity=""' --set parallel.sequence_parallel=false >"$tmp/nf" 2>&1
if grep -q "DOES NOT FIT" "$tmp/nf"; then ok not_fit; else bad not_fit; cat "$tmp/nf"; fi

# 6. MoE (issue 16): the sweep tries experts unsplit (etp 1) and split like
# the dense MLP (etp = tp); one plan carries the MoE communication per layer
# and micro-batch: EP all-to-all 4 s_rows h es + 8 E bytes (s_rows = n_loc k,
# n_loc = b s / tp under SP), ETP 4 (etp-1)/etp etp s_rows h es + (etp-1) 8 E
"$bin" plan --config configs/deepseek-tiny.json --world-size 8 --hardware h100-sxm \
  --set training.global_batch_size=64 --set checkpoint.save=null --sweep --top 0 --json >"$tmp/moe_sweep" 2>&1
"$bin" plan --config configs/deepseek-tiny.json --world-size 8 --hardware h100-sxm \
  --set training.global_batch_size=64 --set checkpoint.save=null --set parallel.tensor_model_parallel_size=2 \
  --set parallel.sequence_parallel=true --set parallel.expert_model_parallel_size=2 \
  --set parallel.expert_tensor_parallel_size=2 --json >"$tmp/moe_plan" 2>&1
if $py -c '
import json,sys
L=json.load(open(sys.argv[1]))["layouts"]
assert all("moe" in x for x in L)
lay=[x["layout"] for x in L]
assert any(l["etp"]==1 and l["tp"]>1 for l in lay) and any(l["etp"]>1 for l in lay)
j=json.load(open(sys.argv[2])); q=j["moe"]["per_layer_microbatch"]
h,s,b,k,E,es=128,128,8,4,16,4
srows=b*s/2*k
assert q["a2a_bytes"]==4*srows*h*es+8*E, q
assert q["etp_bytes"]==4*(2-1)/2*2*srows*h*es+8*E, q
assert q["a2a_s"]>0 and q["etp_s"]>0 and j["moe"]["edp"]==2
assert j["time"]["breakdown_s"]["ep_comm"]>0
' "$tmp/moe_sweep" "$tmp/moe_plan"; then ok moe_sweep_comm; else bad moe_sweep_comm; head -c 600 "$tmp/moe_plan"; fi

# issue 29: compute, total and exposed communication per step; overlap can
# only hide communication (the total stays), and hides some of dp=2 ZeRO-1's
# gradient reduction on the cpu-sim hardware (a slow link)
for ov in "" "--overlap-grad-reduce --overlap-param-gather"; do
  # shellcheck disable=SC2086
  "$bin" plan --config tests/configs/gpt-test.json --world-size 2 --hardware cpu-sim \
    --set parallel.zero_stage=1 --set model.untie_embeddings_and_output_weights=true $ov --json \
    >"$tmp/ov${ov:+1}" 2>&1
done
"$bin" plan --config tests/configs/gpt-test.json --world-size 2 --hardware cpu-sim >"$tmp/ovt" 2>&1
if grep -Eq "^  per step: compute [0-9.e-]+ s \| communication [0-9.e-]+ s total, [0-9.e-]+ s exposed" "$tmp/ovt" &&
   /usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p))["time"] for p in sys.argv[1:3])
assert abs(a["communication_s"] - b["communication_s"]) < 1e-12 * a["communication_s"], (a, b)
assert a["exposed_communication_s"] == a["communication_s"] > 0, a
assert 0 < b["exposed_communication_s"] < a["exposed_communication_s"], (a, b)
assert b["iteration_s"] < a["iteration_s"]
assert abs(b["breakdown_s"]["dp_comm"] - b["exposed_communication_s"]) < 1e-12
' "$tmp/ov" "$tmp/ov1"; then ok overlap_exposed; else bad overlap_exposed; cat "$tmp/ovt" | tail -5; fi

# issue 32: the --fp8-* flags (Megatron's names) plan FP8 linears: one fp8
# line and a JSON fp8 object; fp8_param_gather shrinks the gather by 1 byte
# per FP8 weight (the trainer's gather, core/fp8_gather.h); bad combinations exit 2 naming the flag
fp8p=(--config tests/configs/gpt-test.json --world-size 2 --hardware h100-sxm
      --set parallel.zero_stage=1 --set 'training.precision="bf16"')
"$bin" plan "${fp8p[@]}" --fp8-format hybrid --fp8-recipe blockwise --num-layers-at-start-in-bf16 0 \
  --num-layers-at-end-in-bf16 1 >"$tmp/f8t" 2>&1
"$bin" plan "${fp8p[@]}" --json >"$tmp/f16" 2>&1
"$bin" plan "${fp8p[@]}" --fp8-format e4m3 --fp8-param-gather --json >"$tmp/f8j" 2>&1
if grep -q "^  fp8 (hybrid, blockwise): the linears of 1 of 2 layers at the FP8 peak 1979" "$tmp/f8t" &&
   /usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert "fp8" not in a, a.keys()
f = b["fp8"]
assert f["param_gather"] and f["recipe"] == "delayed" and f["fp8_layers"] == 2
# 2 bytes per gathered element, less 1 per FP8 weight
assert f["dp_gather_bytes"] == a["memory"]["bytes"]["parameters"] - f["weights_per_rank"], f
# faster GEMMs, more elementwise traffic (on this tiny model the casts cost
# more than FP8 saves)
ta, tb = a["time"]["breakdown_s"], b["time"]["breakdown_s"]
assert tb["gemm"] < ta["gemm"] and tb["elementwise"] > ta["elementwise"], (ta, tb)
' "$tmp/f16" "$tmp/f8j"; then ok fp8_flags; else bad fp8_flags; cat "$tmp/f8t" "$tmp/f8j" | tail -5; fi
# the sweep plans every layout with the flags (it reloads each from the JSON)
"$bin" plan "${fp8p[@]}" --fp8-format hybrid --sweep --top 2 --json >"$tmp/f8s" 2>&1
if /usr/bin/python3 -c '
import json, sys
L = json.load(open(sys.argv[1]))["layouts"]
assert L and all(x["fp8"]["format"] == "hybrid" for x in L), L
' "$tmp/f8s"; then ok fp8_sweep; else bad fp8_sweep; head -c 600 "$tmp/f8s"; fi
expect2 fp8_format "--fp8-format bogus (expected e4m3 or hybrid)" -- "${fp8p[@]}" --fp8-format bogus
expect2 fp8_alone "without FP8" -- "${fp8p[@]}" --fp8-recipe tensorwise
expect2 fp8_a100 "peak_tflops_fp8" -- "${fp8p[@]/h100-sxm/a100-80gb}" --fp8-format hybrid
expect2 fp8_pg_zero0 "zero_stage >= 1" -- "${fp8p[@]/zero_stage=1/zero_stage=0}" --fp8-format hybrid --fp8-param-gather
expect2 fp8_layers "exceed model.num_layers" -- "${fp8p[@]}" --fp8-format hybrid --num-layers-at-start-in-bf16 2 --num-layers-at-end-in-bf16 1

[ $fails -eq 0 ] && echo "all plan CLI checks passed"
exit $([ $fails -eq 0 ] && echo 0 || echo 1)
