"""Self-checks of tests/reference/llama_reference.py against other, independent
formulations of the same math, so that a parity failure can be blamed on
megatrain and not on the reference:

  - RoPE interleaved = Meta's original Llama apply_rotary_emb (pairs
    (2i, 2i+1) as complex numbers times exp(i pos theta_i), via
    torch.polar / view_as_complex);
  - RoPE rotate-half (HF, Megatron default) = the same rotation after Hugging
    Face's convert_llama_weights_to_hf permutation of each head's channels
    (interleaved pair i -> channels i and i + rot_dim/2);
  - RoPE: norms preserved, <R(m) q, R(n) k> depends only on m - n (RoFormer
    §3.4.2), channels beyond rot_dim untouched (rotary_percent);
  - GQA attention = an explicit loop over query heads, query head n reading
    the K/V head of its group n // (np/ng) in Megatron's fused qkv row layout;
    with ng = np the layout is GPT-2's [heads, 3, hn];
  - RMSNorm = x / sqrt(mean(x^2) + eps) * w element by element; SwiGLU =
    x sigmoid(x) * up.
  - MoE routing (tests/reference/moe_model_router.py, per-token loops) =
    Megatron-core's vectorised formulation (torch.topk, group mask filled
    with -inf, scatter to a routing map; the balance losses through
    switch_load_balancing_loss_func's sum(probs.sum(0) * tokens_per_expert)
    form and seq_aux_loss's reshape of [s, b, E] to [s, b*E]) on random logits:
    softmax / pre-softmax / sigmoid, expert bias, group-limited top-k, scaling;
    and a hand-made case where the expert bias changes the choice but not the
    gate weights.
usage: /usr/bin/python3 tests/reference/test_llama_reference.py
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as R  # noqa: E402

torch.manual_seed(0)
D = torch.float64


def cfg(**kw):
    d = dict(num_layers=1, hidden_size=32, num_attention_heads=4, seq_length=7, vocab_size=50)
    d.update(kw)
    return R.Config(d)


def close(a, b, what, tol=1e-12):
    if a.numel() == 0 and b.numel() == 0:
        return
    err = (a - b).abs().max().item()
    assert err <= tol * max(1.0, b.abs().max().item()), "%s: max abs diff %.3e" % (what, err)


def meta_rope(x, pos, base, rot_dim):
    """Meta's llama/model.py: precompute_freqs_cis + apply_rotary_emb on
    x [b, s, heads, hn] (interleaved pairs), first rot_dim channels."""
    freqs = 1.0 / (base ** (torch.arange(0, rot_dim, 2, dtype=D)[: rot_dim // 2] / rot_dim))
    freqs_cis = torch.polar(torch.ones(len(pos), rot_dim // 2, dtype=D), torch.outer(pos, freqs))
    xr = x[..., :rot_dim]
    xc = torch.view_as_complex(xr.reshape(*xr.shape[:-1], -1, 2).contiguous())
    out = torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(-2)
    return torch.cat((out, x[..., rot_dim:]), dim=-1)


def check_rope():
    for hn, pct, base in ((16, 1.0, 10000.0), (16, 0.5, 10000.0), (24, 1.0, 500000.0), (8, 0.75, 100.0)):
        c = cfg(kv_channels=hn, rotary_percent=pct, rotary_base=base, position_embedding_type="rope")
        r, s = c.rot_dim, c.s
        x = torch.randn(2, s, 3, hn, dtype=D)
        pos = torch.arange(s, dtype=D)
        c.rotary_interleaved = True
        cos, sin = R.rope_tables(c, s, D)
        inter = R.apply_rope(c, x, cos, sin)
        close(inter, meta_rope(x, pos, base, r), "interleaved RoPE vs Meta's complex form")
        # HF permutation: rotate-half channel i <-> interleaved channel 2i, i + r/2 <-> 2i + 1
        perm = torch.cat((torch.arange(0, r, 2), torch.arange(1, r, 2), torch.arange(r, hn)))
        c.rotary_interleaved = False
        cos, sin = R.rope_tables(c, s, D)
        half = R.apply_rope(c, x[..., perm], cos, sin)
        close(half, inter[..., perm], "rotate-half RoPE vs HF-permuted Meta form")
        close(half[..., r:], x[..., perm][..., r:], "pass-through channels beyond rot_dim")
        close(half.norm(dim=-1), x.norm(dim=-1), "RoPE preserves norms")
        # relative position: <R(m) q, R(n) k> = <R(m+d) q, R(n+d) k>
        q, k = torch.randn(hn, dtype=D), torch.randn(hn, dtype=D)
        qs = R.apply_rope(c, q.expand(1, s, 1, hn), cos, sin)[0, :, 0]
        ks = R.apply_rope(c, k.expand(1, s, 1, hn), cos, sin)[0, :, 0]
        close(qs[3] @ ks[1], qs[5] @ ks[3], "RoPE scores depend only on the offset", 1e-10)
    print("ok   RoPE: interleaved = Meta's complex form, rotate-half = HF permutation of it, "
          "norms kept, relative, rotary_percent pass-through")


def check_gqa():
    for nh, ng, hn in ((4, 4, 8), (4, 2, 8), (4, 1, 8), (6, 3, 5)):
        c = cfg(num_attention_heads=nh, num_query_groups=ng, kv_channels=hn, add_bias_linear=False)
        b, s, h, nq = 2, c.s, c.h, nh // ng
        P = {"a.linear_qkv.weight": torch.randn((nh + 2 * ng) * hn, h, dtype=D),
             "a.linear_proj.weight": torch.randn(h, nh * hn, dtype=D)}
        x = torch.randn(b, s, h, dtype=D)
        got = R.attention(c, x, P, "a.")
        W = P["a.linear_qkv.weight"]
        ctx = torch.zeros(b, s, nh * hn, dtype=D)
        for n in range(nh):
            g, j = n // nq, n % nq
            base = g * (nq + 2) * hn  # group g's row block: nq query heads, then K, then V
            Wq = W[base + j * hn: base + (j + 1) * hn]
            Wk = W[base + nq * hn: base + (nq + 1) * hn]
            Wv = W[base + (nq + 1) * hn: base + (nq + 2) * hn]
            for bi in range(b):
                q, k, v = x[bi] @ Wq.T, x[bi] @ Wk.T, x[bi] @ Wv.T
                for t in range(s):
                    sc = torch.stack([q[t] @ k[u] / math.sqrt(hn) for u in range(t + 1)])
                    p = torch.softmax(sc, 0)
                    ctx[bi, t, n * hn:(n + 1) * hn] = (p[:, None] * v[: t + 1]).sum(0)
        close(got, ctx @ P["a.linear_proj.weight"].T, "GQA np=%d ng=%d" % (nh, ng), 1e-10)
    print("ok   attention: GQA/MQA/MHA on Megatron's per-group qkv rows = explicit per-head loop")


def check_norm_mlp():
    c = cfg(normalization="RMSNorm", norm_epsilon=1e-5)
    x, w = torch.randn(5, 32, dtype=D), torch.randn(32, dtype=D)
    want = torch.stack([x[i] / math.sqrt(sum(v * v for v in x[i].tolist()) / 32 + 1e-5) * w for i in range(5)])
    close(R.normalize(c, x, {"n.weight": w}, "n"), want, "RMSNorm")
    c = cfg(swiglu=True, add_bias_linear=False)
    W1, W2 = torch.randn(2 * 6, 32, dtype=D), torch.randn(32, 6, dtype=D)
    g, u = x @ W1[:6].T, x @ W1[6:].T
    want = (g / (1 + torch.exp(-g)) * u) @ W2.T
    close(R.mlp(c, x, {"m.linear_fc1.weight": W1, "m.linear_fc2.weight": W2}, "m.", 6), want, "SwiGLU")
    print("ok   RMSNorm and SwiGLU (gate rows, then up rows) = element-wise formulas")


def megatron_route(logits, k, score, bias, ng, gk, scaling, pre_softmax):
    """Megatron-core topk_routing_with_score_function, vectorised."""
    N, E = logits.shape

    def topk(sc):
        if not gk:
            return torch.topk(sc, k, dim=-1)
        gs = sc.view(N, ng, -1).topk(k // gk, dim=-1)[0].sum(-1)
        gidx = torch.topk(gs, gk, dim=-1)[1]
        gmask = torch.zeros_like(gs).scatter(1, gidx, 1)
        mask = gmask.unsqueeze(-1).expand(N, ng, E // ng).reshape(N, -1)
        return torch.topk(sc.masked_fill(~mask.bool(), float("-inf")), k, dim=-1)

    if score == "softmax":
        if pre_softmax:
            probs, idx = topk(torch.softmax(logits, -1))
        else:
            sc, idx = topk(logits)
            probs = torch.softmax(sc, -1)
    else:
        sc = torch.sigmoid(logits)
        if bias is not None:
            _, idx = topk(sc + torch.tensor(bias))
            sc = torch.gather(sc, 1, idx)
        else:
            sc, idx = topk(sc)
        probs = sc / (sc.sum(-1, keepdim=True) + 1e-20) if k > 1 else sc
    if scaling:
        probs = probs * scaling
    return torch.zeros_like(logits).scatter(1, idx, probs), idx


def megatron_lb(logits, k, score, lb_type, s, b):
    """compute_routing_scores_for_aux_loss + switch_load_balancing_loss_func."""
    N, E = logits.shape
    if score == "softmax":
        p = torch.softmax(logits, -1)
    else:
        p = torch.sigmoid(logits)
        p = p / (p.sum(-1, keepdim=True) + 1e-20)
    rmap = torch.zeros_like(logits).scatter(1, torch.topk(p, k, dim=1)[1], 1)
    if lb_type == "aux_loss":
        return (p.sum(0) * rmap.sum(0)).sum() * E / (k * N * N)
    p, rmap = p.reshape(s, -1), rmap.reshape(s, -1)  # [s, b*E]
    return (p.sum(0) * rmap.sum(0)).sum() * E / (k * s * s) / b


def check_router():
    import numpy as np
    import moe_model_router as MR
    s, b, E = 6, 3, 8
    n_cases = 0
    for score, pre, bias_on, groups, scaling, k, lb in [
            ("softmax", False, False, (0, 0), 0.0, 2, "aux_loss"),
            ("softmax", True, False, (0, 0), 0.0, 2, "seq_aux_loss"),
            ("softmax", False, False, (4, 2), 1.5, 4, "aux_loss"),
            ("sigmoid", False, False, (0, 0), 0.0, 1, "aux_loss"),
            ("sigmoid", False, True, (0, 0), 2.5, 2, "seq_aux_loss"),
            ("sigmoid", False, True, (4, 2), 2.5, 4, "seq_aux_loss"),
            ("sigmoid", False, False, (2, 1), 0.0, 3, "aux_loss")]:
        c = cfg(num_experts=E, moe_router_topk=k, moe_router_score_function=score,
                moe_router_pre_softmax=pre, moe_router_num_groups=groups[0],
                moe_router_group_topk=groups[1], moe_router_topk_scaling_factor=scaling,
                moe_router_load_balancing_type=lb, micro_batch_size=b)
        for _ in range(5):
            logits = torch.randn(s * b, E, dtype=D)
            bias = np.random.RandomState(n_cases).uniform(-0.3, 0.3, E) if bias_on else None
            expert, kept, gates, lb_v, _, _ = MR.route(logits, c, bias)
            dense = torch.zeros(s * b, E, dtype=D).scatter(1, torch.tensor(expert), gates)
            want, _ = megatron_route(logits, k, score, bias, groups[0], groups[1], scaling, pre)
            close(dense, want, "routing %s k=%d groups=%s" % (score, k, groups))
            close(lb_v, megatron_lb(logits, k, score, lb, s, b), "%s %s" % (lb, score))
            n_cases += 1
    # hand-made: 1 token, 4 experts, sigmoid top-2; the bias moves the choice
    # from {0, 1} to {0, 3} and the gates stay the normalised sigmoids
    c = cfg(num_experts=4, moe_router_topk=2, moe_router_score_function="sigmoid")
    logits = torch.tensor([[2.0, 1.0, -1.0, 0.5]], dtype=D)
    sg = torch.sigmoid(logits)[0]
    e0, _, g0, _, _, _ = MR.route(logits, c, None)
    e1, _, g1, _, _, _ = MR.route(logits, c, np.array([0.0, 0.0, 0.0, 0.2]))
    assert e0.tolist() == [[0, 1]] and e1.tolist() == [[0, 3]], (e0, e1)
    close(g0[0], torch.stack([sg[0], sg[1]]) / (sg[0] + sg[1]), "gates without bias")
    close(g1[0], torch.stack([sg[0], sg[3]]) / (sg[0] + sg[3]), "gates with bias")
    print("ok   MoE routing (%d random cases: softmax/pre-softmax/sigmoid, expert bias, groups, "
          "scaling, aux/seq_aux) = Megatron's vectorised form; bias moves the choice only" % n_cases)


if __name__ == "__main__":
    torch.set_num_threads(1)
    check_rope()
    check_gqa()
    check_norm_mlp()
    check_router()
