"""Routing of the full-model PyTorch reference (tests/reference/llama_reference.py)
with the DeepSeek-style options, written from Megatron-core's semantics
(megatron/core/transformer/moe/router.py TopKRouter.routing, moe_utils.py
topk_routing_with_score_function, group_limited_topk,
compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func,
router.py _apply_seq_aux_loss) and the papers, not from megatrain's C code:

  scores     softmax: the logits themselves select (top-k by logit), gates =
             softmax over the k chosen logits; with moe_router_pre_softmax the
             softmax over all E experts selects and gates are those probs.
             sigmoid (DeepSeek-V3 §2.1.1): s = sigmoid(logits); selection by
             s + expert_bias (Wang et al. 2024, arXiv:2408.15664: the bias
             shifts the choice only); gates = s of the chosen experts,
             normalised to sum 1 when k > 1 (+1e-20, as Megatron). With
             softmax (megatrain only; Megatron refuses) the bias shifts the
             logit, or the probability with pre-softmax, for the choice.
  scaling    gates *= moe_router_topk_scaling_factor (when set).
  groups     (DeepSeek-V2 §2.1.3 device-limited, V3 node-limited routing)
             E experts in G equal consecutive groups; a group's score is the
             sum of its top (k / group_topk) selection scores; the group_topk
             best groups are kept and top-k is taken inside them.
  ties       the lower index wins (experts and groups).
  balance    computed from the router's probabilities before any capacity
             dropping, on Megatron's separate "aux" routing: p = softmax(logits)
             or sigmoid(logits) normalised over all E; aux map = plain top-k of
             p (no bias, no group limit).
               aux_loss      E * sum_e f_e P_e over the micro-batch's N tokens,
                             f_e = count_e / (N k), P_e = mean_t p_te
               seq_aux_loss  the same per sequence (token t = i*b + j is
                             position i of sample j: [s, b] order), f over the
                             sample's s tokens, then the mean over the b samples
               none          0
  z-loss     mean_t logsumexp(logits_t)^2 (ST-MoE), whatever the score.
  capacity   C = ceil(N k / E * cf); an over-full expert keeps the C slots of
             highest gate ("probs", ties to the earlier token) or the first
             tokens ("position"); dropless without cf.
Non-differentiable choices are made on the values; gradients flow through
autograd (float64 in the tests).
"""
import math

import numpy as np
import torch


def _topk_lower_first(vals, k):
    """Indices of the k largest of vals (1-D np array), ties to the lower index."""
    order = sorted(range(len(vals)), key=lambda e: (-vals[e], e))
    return order[:k]


def select(sel, k, num_groups=0, group_topk=0):
    """sel [N, E] np selection scores -> chosen experts [N, k] (np int64)."""
    N, E = sel.shape
    out = np.zeros((N, k), dtype=np.int64)
    for t in range(N):
        allowed = list(range(E))
        if num_groups:
            per = E // num_groups
            per_group = k // group_topk
            gscore = [sum(sorted(sel[t, g * per:(g + 1) * per], reverse=True)[:per_group])
                      for g in range(num_groups)]
            groups = _topk_lower_first(np.array(gscore), group_topk)
            allowed = [e for e in range(E) if e // per in groups]
        cand = sorted(allowed, key=lambda e: (-sel[t, e], e))
        out[t] = cand[:k]
    return out


def aux_scores(logits, sigmoid):
    """Megatron's compute_routing_scores_for_aux_loss: [N, E] probabilities."""
    if sigmoid:
        s = torch.sigmoid(logits)
        return s / (s.sum(dim=-1, keepdim=True) + 1e-20)
    return torch.softmax(logits, dim=-1)


def balance_loss(p, k, lb_type, b):
    """Balance loss of one micro-batch from aux probabilities p [N, E] (tokens
    in [s, b] order, b samples)."""
    N, E = p.shape
    if lb_type == "none":
        return p.sum() * 0.0
    top = np.array([_topk_lower_first(row, k) for row in p.detach().numpy()])
    count = np.zeros((N, E))
    for t in range(N):
        count[t, top[t]] = 1.0
    count = torch.tensor(count, dtype=p.dtype)
    if lb_type == "aux_loss":
        f = count.sum(0) / (N * k)
        return E * (f * p.mean(0)).sum()
    assert lb_type == "seq_aux_loss", lb_type
    s = N // b
    pv, cv = p.view(s, b, E), count.view(s, b, E)
    f = cv.sum(0) / (s * k)      # [b, E]
    P = pv.mean(0)               # [b, E]
    return (E * (f * P).sum(-1)).mean()


def route(logits, c, bias=None):
    """logits [N, E] tensor; c: llama_reference.Config; bias [E] np or None.
    Returns expert [N, k] (np), kept [N, k] (np bool), gates [N, k] (tensor),
    lb (tensor), z (tensor), tokens per expert [E] (np, before dropping)."""
    N, E = logits.shape
    k = c.topk
    lv = logits.detach().numpy()
    if c.score == "sigmoid":
        sc = torch.sigmoid(logits)
        sel = sc.detach().numpy() + (bias if bias is not None else 0.0)
        expert = select(sel, k, c.num_groups, c.group_topk)
        gates = torch.gather(sc, 1, torch.tensor(expert))
        if k > 1:
            gates = gates / (gates.sum(dim=-1, keepdim=True) + 1e-20)
    else:
        # softmax + expert bias (megatrain extension; Megatron raises): the bias
        # shifts the selection value, the logit or the pre-softmax probability
        shift = bias if bias is not None else 0.0
        probs = torch.softmax(logits, dim=-1)
        if c.pre_softmax:
            expert = select(probs.detach().numpy() + shift, k, c.num_groups, c.group_topk)
            gates = torch.gather(probs, 1, torch.tensor(expert))
        else:
            expert = select(lv + shift, k, c.num_groups, c.group_topk)
            gates = torch.softmax(torch.gather(logits, 1, torch.tensor(expert)), dim=-1)
    if c.scaling:
        gates = gates * c.scaling
    routed = np.bincount(expert.reshape(-1), minlength=E)
    kept = np.ones((N, k), dtype=bool)
    if c.cf > 0:
        cap = int(math.ceil(N * k / E * c.cf - 1e-9))
        gv = gates.detach().numpy().astype(np.float32)  # megatrain compares fp32 gates
        for e in range(E):
            cands = [(t, j) for t in range(N) for j in range(k) if expert[t, j] == e]
            if len(cands) <= cap:
                continue
            if c.policy == "probs":
                cands.sort(key=lambda tj: (-gv[tj[0], tj[1]], tj[0]))
            for t, j in cands[cap:]:
                kept[t, j] = False
    lb = balance_loss(aux_scores(logits, c.score == "sigmoid"), k, c.lb_type, c.b)
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return expert, kept, gates, lb, z, routed
