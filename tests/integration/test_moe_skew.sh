#!/usr/bin/env bash
# MoE receive buffers sized by the routing (model/moe_rowbuf.h): with the
# failpoint moe_route_skew every token of both EP ranks routes to experts 0
# and 1 (EP rank 0), the dropless worst case. The step runs (finite loss),
# rank 0's buffers grow to the worst case ep n_loc k rows and rank 1's stay
# empty, and each rank's allocator peak (activations; workspace less the
# backend's op scratch) equals `megatrain plan --moe-recv-rows R
# --moe-expert-rows RX` with the rows it logged, byte for byte. With
# MEGATRAIN_TEST_FULL=1 also the same run without the failpoint: fewer rows
# than the worst case on both ranks, less activation memory on rank 0, the
# allocator equal to the plan from its rows (CI has that exactness in
# test_plan_memory's MoE cases).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
export MEGATRAIN_MEM_REPORT=1
SETS=(--set training.train_iters=1 --set training.eval_interval=0 --set training.lr_warmup_iters=1
      --set model.num_layers=2 --set model.num_experts=4 --set model.moe_router_topk=2
      --set parallel.expert_model_parallel_size=2 --set parallel.expert_tensor_parallel_size=1)
mr() { mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_MEM_REPORT -x MEGATRAIN_FAILPOINT \
         "$MT" --config $CFG "${SETS[@]}"; }
MEGATRAIN_FAILPOINT=moe_route_skew mr >"$TMP/skew.log" 2>"$TMP/skew.err" ||
  { echo "skewed run failed:"; tail -20 "$TMP/skew.log" "$TMP/skew.err"; exit 1; }
FULL=$(full_or 1 0)
if [ "$FULL" = 1 ]; then
  MEGATRAIN_FAILPOINT= mr >"$TMP/even.log" 2>"$TMP/even.err" ||
    { echo "run failed:"; tail -20 "$TMP/even.log" "$TMP/even.err"; exit 1; }
fi
"$MT" plan --config $CFG --world-size 2 --hardware a100-80gb --json "${SETS[@]}" >"$TMP/plan.json" ||
  exit 1
/usr/bin/python3 - "$TMP" "$FULL" "$MT" --config $CFG --world-size 2 --hardware a100-80gb --json \
    "${SETS[@]}" <<'PY'
import json, math, re, subprocess, sys
tmp, full, plan_cmd = sys.argv[1], sys.argv[2] == "1", [sys.argv[3], "plan"] + sys.argv[4:]
worst = json.load(open(tmp + "/plan.json"))["memory"]["moe_rows"]["worst_case"]
def reports(tag):
    r = [json.loads(l.split(" ", 1)[1]) for l in open("%s/%s.err" % (tmp, tag))
         if l.startswith("megatrain-mem-peak ")]
    assert len(r) == 2, "%s: %d memory reports" % (tag, len(r))
    return {m["rank"]: m for m in r}
def losses(tag):
    return [float(x) for x in re.findall(r"lm loss[: ]+([0-9.eE+-]+|nan|inf)",
                                          open("%s/%s.log" % (tmp, tag)).read())]
skew = reports("skew")
ls = losses("skew")
assert ls and all(math.isfinite(x) for x in ls), "skewed run: lm loss %s" % ls
assert skew[0]["moe_recv_rows"] == worst and skew[0]["moe_expert_rows"] == worst, skew[0]
assert skew[1]["moe_recv_rows"] == 0 and skew[1]["moe_expert_rows"] == 0, skew[1]
runs = [("skew", skew)]
if full:
    even = reports("even")
    for r in (0, 1):
        assert 0 < even[r]["moe_recv_rows"] < worst, ("even run rank %d" % r, even[r], worst)
    assert even[0]["peak"]["activations"] < skew[0]["peak"]["activations"]
    runs.append(("even", even))
bad = []
for tag, rep in runs:
    for r, m in sorted(rep.items()):
        out = subprocess.run(plan_cmd + ["--moe-recv-rows", str(m["moe_recv_rows"]),
                             "--moe-expert-rows", str(m["moe_expert_rows"])], check=True,
                             capture_output=True, text=True).stdout
        p = json.loads(out)["memory"]["per_stage"][m["pp_rank"]]["bytes"]
        if p["activations"] != m["peak"]["activations"]:
            bad.append("%s rank %d activations: predicted %d measured %d"
                       % (tag, r, p["activations"], m["peak"]["activations"]))
        if p["workspace"] != m["peak"]["workspace"] - m["op_scratch"]:
            bad.append("%s rank %d workspace: predicted %d measured %d - op scratch %d"
                       % (tag, r, p["workspace"], m["peak"]["workspace"], m["op_scratch"]))
        print("%s rank %d: %d rows received (worst case %d), activations %d, workspace %d bytes"
              % (tag, r, m["moe_recv_rows"], worst, m["peak"]["activations"],
                 m["peak"]["workspace"] - m["op_scratch"]))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
echo "PASS: skewed routing grows the receive buffers to the worst case and runs; the allocator equals the plan from the logged rows"
