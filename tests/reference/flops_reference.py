#!/usr/bin/env python3
"""tests/reference/flops_reference.py — model FLOPs of one training
iteration, counted GEMM by GEMM from a megatrain config file, as an
independent check of model/gpt_flops.c (issue 32).

The count: every GEMM of [m, k] x [k, n] is 2 m k n FLOPs; each runs three
times per iteration (forward, data gradient, weight gradient); only GEMMs
count (no norms, activations, softmax, router). Per layer, T = B s tokens:
  linear_qkv   T x h -> np hn + 2 ng hn
  linear_proj  T x np hn -> h
  core attention, per sample and per head: Q K^T [s, hn] x [hn, s] and
    P V [s, s] x [s, hn]; formula "paper" counts all s x s scores, formula
    "megatron" the causal lower half, s^2 / 2 per segment (sum over the
    documents of length L_i of L_i^2 / 2 when given)
  dense MLP    T x h -> f (2 f with SwiGLU), T x f -> h
  MoE MLP      each token through its top-k experts (h -> F (2 F), F -> h)
               and the shared experts (h -> S (2 S), S -> h)
and once the output layer T x h -> padded vocabulary. With
multi_latent_attention (DeepSeek-V2 §2.1) the attention GEMMs are instead
  q            T x h -> np (qk_head_dim + qk_pos_emb_head_dim), or through
               the latent: T x h -> q_lora_rank, T x q_lora_rank -> np (..)
  kv down      T x h -> kv_lora_rank + qk_pos_emb_head_dim
  kv up        T x kv_lora_rank -> np (qk_head_dim + v_head_dim)
  linear_proj  T x np v_head_dim -> h
  core attention per head: Q K^T over qk_head_dim + qk_pos_emb_head_dim
    channels, P V over v_head_dim channels
and, as Megatron's count, 2 FLOPs per channel and token for the q and kv
latent RMSNorms. Multi-token
prediction (mtp_num_layers D) adds D layers of the last layer's kind, D
eh_proj GEMMs T x 2h -> h, D more output-layer GEMMs and, as Megatron's
count, 2 x 3h per token for each depth's three norms.

Written from those definitions (Narayanan et al. 2021 §5.1; Megatron-core's
docstrings on the causal half), not from megatrain's or Megatron's code.

Usage: flops_reference.py CONFIG [--set section.key=JSON]... [--seqlens L1,L2,...]
prints the FLOPs (repr of a Python float).
"""
import json
import sys


def _get(cfg, section, key, default=None):
    v = cfg.get(section, {}).get(key)
    return default if v is None else v


def gemm(m, k, n):
    """FLOPs of one [m, k] x [k, n] product."""
    return 2.0 * m * k * n


def iteration_flops(cfg, seqlens=None):
    """Model FLOPs of one iteration of `cfg` (dict of sections)."""
    formula = _get(cfg, "logging", "flops_formula", "megatron")
    B = _get(cfg, "training", "global_batch_size")
    s = _get(cfg, "model", "seq_length")
    L = _get(cfg, "model", "num_layers")
    h = _get(cfg, "model", "hidden_size")
    heads = _get(cfg, "model", "num_attention_heads")
    groups = heads
    if _get(cfg, "model", "group_query_attention", False):
        groups = _get(cfg, "model", "num_query_groups", 1)
    hn = _get(cfg, "model", "kv_channels", h // heads)
    f = _get(cfg, "model", "ffn_hidden_size", 4 * h)
    gated = 2 if _get(cfg, "model", "swiglu", False) else 1
    tp = _get(cfg, "parallel", "tensor_model_parallel_size", 1)
    mult = _get(cfg, "model", "make_vocab_size_divisible_by", 128) * tp
    V = _get(cfg, "model", "vocab_size")
    Vp = -(-V // mult) * mult
    experts = _get(cfg, "model", "num_experts", 0)
    freq = _get(cfg, "model", "moe_layer_freq", 1)
    if not experts:
        moe = [False] * L
    elif isinstance(freq, list):
        moe = [bool(x) for x in freq]
    else:
        moe = [i % freq == 0 for i in range(L)]
    topk = _get(cfg, "model", "moe_router_topk", 2)
    F = _get(cfg, "model", "moe_ffn_hidden_size", f)
    S = _get(cfg, "model", "moe_shared_expert_intermediate_size", 0)

    T = B * s
    if seqlens is None:
        seqlens = [s] * B
    assert sum(seqlens) == T, "segments must cover the global batch"
    q, kv = heads * hn, groups * hn
    fwd = 0.0
    # multi-token prediction: D more layers of the last layer's kind, each
    # with its eh_proj [2h -> h] and one more output-layer GEMM; Megatron
    # also counts 3 h per token for the depth's three norms (2 FLOPs each)
    D = _get(cfg, "model", "mtp_num_layers", 0) or 0
    moe = moe + [moe[-1]] * D
    for _ in range(D):
        fwd += gemm(T, 2 * h, h) + 2.0 * T * 3 * h + gemm(T, h, Vp)
    mla = _get(cfg, "model", "multi_latent_attention", False)
    if mla:
        q_lora = _get(cfg, "model", "q_lora_rank", None)
        kv_lora = _get(cfg, "model", "kv_lora_rank", 512)
        nope = _get(cfg, "model", "qk_head_dim", 128)
        rope = _get(cfg, "model", "qk_pos_emb_head_dim", 64)
        dv = _get(cfg, "model", "v_head_dim", 128)
        dqk = nope + rope
    for layer in range(L + D):
        if mla:
            if q_lora:
                fwd += gemm(T, h, q_lora) + 2.0 * T * q_lora + gemm(T, q_lora, heads * dqk)
            else:
                fwd += gemm(T, h, heads * dqk)
            fwd += gemm(T, h, kv_lora + rope) + 2.0 * T * kv_lora
            fwd += gemm(T, kv_lora, heads * (nope + dv)) + gemm(T, heads * dv, h)
        else:
            fwd += gemm(T, h, q + 2 * kv) + gemm(T, q, h)
        for n in (seqlens if formula == "megatron" else [s] * B):
            scores = n * n / 2.0 if formula == "megatron" else n * n
            if mla:
                # per head: Q K^T (2 dqk FLOPs per score) and P V (2 dv)
                fwd += heads * (2.0 * dqk * scores + 2.0 * dv * scores)
            else:
                # per head: Q K^T and P V, each 2 hn FLOPs per score
                fwd += heads * 2 * (2.0 * hn * scores)
        widths = [F] * topk + ([S] if S else []) if moe[layer] else [f]
        for w in widths:
            fwd += gemm(T, h, gated * w) + gemm(T, w, h)
    fwd += gemm(T, h, Vp)
    return 3.0 * fwd


def _apply_set(cfg, item):
    key, _, value = item.partition("=")
    section, _, name = key.partition(".")
    try:
        value = json.loads(value)
    except ValueError:
        pass
    cfg.setdefault(section, {})[name] = value


def main(argv):
    with open(argv[1]) as fh:
        cfg = json.load(fh)
    seqlens = None
    i = 2
    while i < len(argv):
        if argv[i] == "--set":
            _apply_set(cfg, argv[i + 1])
        elif argv[i] == "--seqlens":
            seqlens = [int(x) for x in argv[i + 1].split(",")]
        else:
            sys.exit("flops_reference.py: unknown argument %s" % argv[i])
        i += 2
    print(repr(iteration_flops(cfg, seqlens)))


if __name__ == "__main__":
    main(sys.argv)
