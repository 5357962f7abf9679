"""tests/reference/test_moe_router.py - the C router (model/moe_router.h, run by
build/tests/tools/moe_route_dump) against the PyTorch reference
(moe_router_reference.py): routing decisions, kept slots, counts, gate
weights, balance loss, z-loss and the gradient of the logits, on hand-made
and random cases over every router option; plus the expert-bias case (the
bias changes the selection but not the gate weights).

usage: test_moe_router.py DUMP_TOOL          (exit 1 on the first mismatch)
"""
import math
import subprocess
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import moe_router_reference as ref  # noqa: E402

LB = {"aux_loss": 0, "seq_aux_loss": 1, "global_aux_loss": 2, "none": 3}
TOL = 1e-6
worst = {"gate": 0.0, "lb_loss": 0.0, "z_loss": 0.0, "dlogits": 0.0}


def run_c(tool, logits, k, score="softmax", pre_softmax=False, scaling_factor=None,
          num_groups=None, group_topk=None, expert_bias=None, lb_type="aux_loss", seq_b=1,
          global_tokens_per_expert=None, capacity_factor=None, drop_policy="probs",
          round_bf16=False, dgate=None, lb_scale=0.0, z_scale=0.0, splits=1):
    N, E = logits.shape
    head = [N, E, k, seq_b, int(score == "sigmoid"), int(pre_softmax), scaling_factor or 0,
            num_groups or 0, group_topk or 0, LB[lb_type], capacity_factor or 0,
            int(drop_policy == "position"), int(round_bf16), repr(float(lb_scale)),
            repr(float(z_scale)), splits, int(expert_bias is not None),
            int(global_tokens_per_expert is not None)]
    parts = [" ".join(str(v) for v in head)]
    f32 = lambda t: " ".join("%.9g" % v for v in torch.as_tensor(t, dtype=torch.float32).reshape(-1).tolist())
    parts.append(f32(logits))
    if expert_bias is not None:
        parts.append(f32(expert_bias))
    if global_tokens_per_expert is not None:
        parts.append(" ".join(str(int(v)) for v in global_tokens_per_expert))
    parts.append(f32(dgate if dgate is not None else torch.zeros(N, k)))
    p = subprocess.run([tool, "-"], input="\n".join(parts) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("moe_route_dump failed: " + p.stderr)
    import json
    return json.loads(p.stdout)


def rel(a, b, scale):
    return abs(a - b) / max(scale, 1e-30)


def compare(name, tool, logits, k, **kw):
    """Run both, assert equality within TOL; return (c, reference)."""
    splits = kw.pop("splits", 1)
    c = run_c(tool, logits, k, splits=splits, **kw)
    kw2 = dict(kw)
    kw2["dgate"] = torch.tensor(c["dgate"], dtype=torch.float32).to(torch.float64)
    r = ref.route(logits, k, **kw2)
    N, E = logits.shape
    flat = lambda x: [v for row in x for v in row]

    def fail(msg):
        sys.exit("%s: %s" % (name, msg))

    if c["expert"] != flat(r["expert"]):
        fail("experts differ:\n C   %s\n ref %s" % (c["expert"], flat(r["expert"])))
    if c["kept"] != flat(r["kept"]):
        fail("kept slots differ:\n C   %s\n ref %s" % (c["kept"], flat(r["kept"])))
    for key in ("routed", "aux_routed", "capacity", "dropped"):
        if c[key] != r[key]:
            fail("%s: C %s vs reference %s" % (key, c[key], r[key]))
    for i, (a, b) in enumerate(zip(c["gate"], flat(r["gate"]))):
        e = rel(a, b, max(abs(b), 1.0))
        worst["gate"] = max(worst["gate"], e)
        if e > TOL:
            fail("gate of slot %d: C %.9g vs reference %.12g" % (i, a, b))
    for key in ("lb_loss", "z_loss"):
        e = rel(c[key], r[key], max(abs(r[key]), 1.0))
        worst[key] = max(worst[key], e)
        if e > TOL:
            fail("%s: C %.17g vs reference %.17g" % (key, c[key], r[key]))
    rd = flat(r["dlogits"])
    scale = max(abs(v) for v in rd) or 1.0
    for i, (a, b) in enumerate(zip(c["dlogits"], rd)):
        e = rel(a, b, scale)
        worst["dlogits"] = max(worst["dlogits"], e)
        if e > TOL:
            fail("dlogits[%d, %d]: C %.9g vs reference %.12g (max |dlogits| %.3g)"
                 % (i // E, i % E, a, b, scale))
    return c, r


def hand_cases(tool):
    # the hand-worked softmax top-2 case of test_moe_capacity.c
    lg = torch.tensor([[2, 1, 0, -1], [.5, .3, .1, 0], [-1, 0, 1, 2], [.1, 3, 0, -.2]])
    dg = torch.tensor([[1., -2.], [.5, .25], [3., 1.], [-1., 2.]])
    c, _ = compare("hand softmax", tool, lg, 2, dgate=dg, lb_scale=0.7, z_scale=0.3)
    assert c["routed"] == [3, 3, 1, 1] and abs(c["lb_loss"] - 1.12712) < 1e-5, c
    assert abs(c["z_loss"] - 6.09994) < 1e-5, c
    compare("hand softmax capacity", tool, lg, 2, dgate=dg, capacity_factor=1.0, lb_scale=0.7)
    compare("hand sigmoid", tool, lg, 2, score="sigmoid", dgate=dg, lb_scale=0.7, z_scale=0.3,
            scaling_factor=2.5)
    compare("hand seq_aux", tool, lg, 2, score="sigmoid", dgate=dg, lb_type="seq_aux_loss",
            seq_b=2, lb_scale=1.0)
    compare("hand global", tool, lg, 2, dgate=dg, lb_type="global_aux_loss",
            global_tokens_per_expert=[10, 2, 4, 0], lb_scale=1.0)

    # group-limited: 4 groups of 2, 2 groups, top-4. Group scores (top-2 sums)
    # 9.9, 0, 3, 5.7 keep groups 0 and 3: expert 4 (3.0) is excluded although
    # it is among the global top-4.
    lg = torch.tensor([[5, 4.9, 0, 0, 3, 0, 2.9, 2.8]])
    c, _ = compare("hand groups", tool, lg, 4, num_groups=4, group_topk=2,
                   dgate=torch.tensor([[1., 2., 3., 4.]]), lb_scale=0.5)
    assert c["expert"] == [0, 1, 6, 7], c["expert"]
    c, _ = compare("hand no groups", tool, lg, 4, dgate=torch.tensor([[1., 2., 3., 4.]]))
    assert c["expert"] == [0, 1, 4, 6], c["expert"]
    # group-limited sigmoid with a bias: groups chosen on the biased scores
    compare("hand groups bias", tool, lg, 4, score="sigmoid", num_groups=4, group_topk=2,
            expert_bias=[0, 0, 0, 0, 0.5, 0.5, 0, 0], dgate=torch.tensor([[1., 2., 3., 4.]]),
            lb_scale=0.5)

    # the expert bias changes the selection but not the gate weights: token 0's
    # choice is unchanged, token 1 picks expert 2 instead of expert 1
    lg = torch.tensor([[3.0, 2.0, -2.0, -3.0], [2.0, 1.0, 0.9, -1.0]])
    bias = [0.0, 0.0, 0.15, 0.0]
    dg = torch.tensor([[1.0, -1.0], [0.5, 2.0]])
    for score, pre in (("sigmoid", False), ("softmax", True), ("softmax", False)):
        kw = dict(score=score, pre_softmax=pre, dgate=dg, lb_scale=0.3, z_scale=0.1,
                  scaling_factor=1.5)
        c0, _ = compare("bias off %s" % score, tool, lg, 2, **kw)
        c1, _ = compare("bias on %s" % score, tool, lg, 2, expert_bias=bias, **kw)
        assert c0["expert"] == [0, 1, 0, 1], c0["expert"]
        assert c1["expert"] == [0, 1, 0, 2], (score, c1["expert"])
        assert c1["gate"][:2] == c0["gate"][:2], "bias changed an unchanged token's gates"
        assert c1["lb_loss"] == c0["lb_loss"], "bias changed the balance loss"
        # token 1's gates are those of the unbiased scores of experts 0 and 2
        x = lg[1].double()
        if score == "sigmoid":
            s = torch.sigmoid(x[[0, 2]])
            want = s / s.sum()
        elif pre:
            want = torch.softmax(x, -1)[[0, 2]]
        else:
            want = torch.softmax(x[[0, 2]], -1)
        want = (want * 1.5).tolist()
        for a, b in zip(c1["gate"][2:], want):
            assert abs(a - b) <= 1e-6 * max(1.0, abs(b)), (score, c1["gate"], want)
        # and not the biased ones
        bb = torch.tensor([0.0, 0.15], dtype=torch.float64)
        if score == "sigmoid":
            sb = torch.sigmoid(x[[0, 2]]) + bb
            biased = sb / sb.sum()
        elif pre:
            biased = torch.softmax(x, -1)[[0, 2]] + bb
        else:
            biased = torch.softmax(x[[0, 2]] + bb, -1)
        biased = (biased * 1.5).tolist()
        assert any(abs(a - b) > 1e-3 for a, b in zip(c1["gate"][2:], biased)), (score, biased)
    print("hand cases: ok (softmax, sigmoid, scaling, seq/global aux, groups, expert bias "
          "changes the selection, not the gates nor the balance loss)")


def random_cases(tool):
    g = torch.Generator().manual_seed(1234)
    N, E, b = 32, 8, 4
    combos = []
    for score in ("softmax", "sigmoid"):
        for pre in ((False, True) if score == "softmax" else (False,)):
            for lb in ("aux_loss", "seq_aux_loss", "global_aux_loss", "none"):
                combos.append((score, pre, lb))
    n = 0
    for i, (score, pre, lb) in enumerate(combos):
        for variant in range(4):
            k = (1, 2, 4, 2)[variant]
            groups = variant in (1, 2) and k >= 2
            bias = variant in (2, 3)
            if k == 1 and score == "softmax" and not pre:
                pass  # top-1 softmax after top-k: gate 1 (megatrain allows it)
            cf = (None, 1.0, 0.5, None)[(i + variant) % 4]
            logits = torch.randn(N, E, generator=g, dtype=torch.float32) * (1.0 + variant)
            kw = dict(
                score=score, pre_softmax=pre, lb_type=lb, seq_b=b,
                scaling_factor=(None, 2.5)[(i + variant) % 2],
                num_groups=4 if groups else None, group_topk=2 if groups else None,
                expert_bias=(torch.randn(E, generator=g) * 0.5).tolist() if bias else None,
                global_tokens_per_expert=(torch.randint(0, 50, (E,), generator=g).tolist()
                                          if lb == "global_aux_loss" and variant != 1 else None),
                capacity_factor=cf, drop_policy=("probs", "position")[variant % 2],
                round_bf16=(variant == 3),
                dgate=torch.randn(N, k, generator=g, dtype=torch.float32),
                lb_scale=0.37, z_scale=0.11, splits=(1, 2, 4, 2)[variant])
            compare("random %s%s %s k%d groups %d bias %d cf %s bf16 %d" %
                    (score, " pre" if pre else "", lb, k, groups, bias, cf, variant == 3),
                    tool, logits, k, **kw)
            n += 1
    print("random cases: %d ok" % n)


def main():
    tool = sys.argv[1]
    torch.set_default_dtype(torch.float32)
    hand_cases(tool)
    random_cases(tool)
    print("worst relative differences: " +
          ", ".join("%s %.2e" % (k, v) for k, v in worst.items()) + " (tolerance %g)" % TOL)


if __name__ == "__main__":
    main()
