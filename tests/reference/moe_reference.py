"""PyTorch reference of megatrain's MoE block (model/moe_layer.h, moe_router.h).

Same contract: probs = softmax over all experts; top-k by logit (ties to the
lower index); gates = softmax over the chosen logits (or the probs with
pre_softmax); capacity C = ceil(N k / E * cf), an over-full expert keeps the
C slots with the highest gate (policy "probs", ties to the earlier token) or
the earliest tokens ("position"); dropped slots contribute 0; expert = GELU
(tanh) MLP with biases; output = sum_j gate_j * expert_{e_j}(x).
Load-balancing loss E * sum_e f_e P_e (f_e = routed slots / (N k) before
dropping, P_e = mean prob); z-loss mean(logsumexp(logits)^2).
Routing choices are made on the values given (non-differentiable); all
gradients flow through autograd in float64.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F


def route(logits, k, cf, policy, pre_softmax):
    """logits: [N, E] tensor. Returns expert [N, k] (np), kept [N, k] (np bool),
    gates [N, k] (tensor, differentiable), probs [N, E], routed [E] (np)."""
    N, E = logits.shape
    lv = logits.detach().cpu().numpy()
    expert = np.zeros((N, k), dtype=np.int64)
    for t in range(N):
        order = sorted(range(E), key=lambda e: (-lv[t, e], e))
        expert[t] = order[:k]
    probs = torch.softmax(logits, dim=-1)
    idx = torch.tensor(expert)
    if pre_softmax:
        gates = torch.gather(probs, 1, idx)
    else:
        gates = torch.softmax(torch.gather(logits, 1, idx), dim=-1)
    routed = np.bincount(expert.reshape(-1), minlength=E)
    kept = np.ones((N, k), dtype=bool)
    if cf is not None and cf > 0:
        cap = int(math.ceil(N * k / E * cf - 1e-9))
        gv = gates.detach().cpu().numpy().astype(np.float32)  # megatrain compares fp32 gates
        for e in range(E):
            cands = [(t, j) for t in range(N) for j in range(k) if expert[t, j] == e]
            if len(cands) <= cap:
                continue
            if policy == "probs":
                cands.sort(key=lambda tj: (-gv[tj[0], tj[1]], tj[0]))
            for t, j in cands[cap:]:
                kept[t, j] = False
    return expert, kept, gates, probs, routed


def aux_losses(logits, probs, routed, k):
    N, E = logits.shape
    f = torch.tensor(routed, dtype=logits.dtype) / (N * k)
    P = probs.mean(dim=0)
    lb = E * (f * P).sum()
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return lb, z


def moe_forward(x, wr, experts, k, cf, policy, pre_softmax):
    """x [N, h], wr [E, h], experts: list of (w1 [F,h], b1, w2 [h,F], b2)."""
    logits = x @ wr.T
    expert, kept, gates, probs, routed = route(logits, k, cf, policy, pre_softmax)
    N = x.shape[0]
    out = torch.zeros_like(x)
    for t in range(N):
        for j in range(k):
            if not kept[t, j]:
                continue
            w1, b1, w2, b2 = experts[expert[t, j]]
            y = F.gelu(x[t] @ w1.T + b1, approximate="tanh") @ w2.T + b2
            out[t] = out[t] + gates[t, j] * y
    lb, z = aux_losses(logits, probs, routed, k)
    return out, lb, z, expert, kept, routed
