"""tests/reference/moe_router_reference.py - an independent PyTorch reference of
the MoE router (model/moe_router.h), written from the math of Megatron-core's
TopKRouter (moe/router.py, moe_utils.py) and DeepSeek-V2/V3, in float64 with
autograd for the gradients.

route(logits, k, ...) takes the fp32 logits [N, E] of one micro-batch (token
order [s, b]) and returns the routing decisions, gate weights, kept slots,
balance loss, z-loss and, given the gate gradients, the gradient of the logits
of  sum(dgate * gate) + lb_scale * LB + z_scale * Z  (selection, group limit,
bias, routing map and capacity are constants, as in the C backward).

Ties (equal values) are broken towards the lower index everywhere: experts in
top-k, groups, tokens of an over-full expert.
"""
import math

import torch


def topk_stable(x, k):
    """Indices of the k largest entries along the last dimension, largest
    first, equal values in increasing index order."""
    order = torch.sort(-x, dim=-1, stable=True).indices
    return order[..., :k]


def route(logits, k, score="softmax", pre_softmax=False, scaling_factor=None, num_groups=None,
          group_topk=None, expert_bias=None, lb_type="aux_loss", seq_b=1,
          global_tokens_per_expert=None, capacity_factor=None, drop_policy="probs",
          round_bf16=False, dgate=None, lb_scale=0.0, z_scale=0.0):
    x = torch.as_tensor(logits, dtype=torch.float32)
    if round_bf16:
        x = x.to(torch.bfloat16)
    lg = x.to(torch.float64).clone().requires_grad_(True)
    N, E = lg.shape

    # scores over all experts
    if score == "softmax":
        scores = torch.softmax(lg, dim=-1)
        sel = scores if pre_softmax else lg
    elif score == "sigmoid":
        scores = torch.sigmoid(lg)
        sel = scores
    else:
        raise ValueError(score)
    sel = sel.detach().clone()
    if expert_bias is not None:
        sel = sel + torch.as_tensor(expert_bias, dtype=torch.float32).to(torch.float64)

    # group-limited routing: sum of the top (k // group_topk) values per group
    if num_groups:
        G = num_groups
        grouped = sel.view(N, G, E // G)
        m = k // group_topk
        gscore = torch.gather(grouped, 2, topk_stable(grouped, m)).sum(dim=-1)
        gsel = topk_stable(gscore, group_topk)
        gmask = torch.zeros(N, G, dtype=torch.bool).scatter(1, gsel, True)
        emask = gmask.unsqueeze(-1).expand(N, G, E // G).reshape(N, E)
        sel = sel.masked_fill(~emask, float("-inf"))
    idx = topk_stable(sel, k)  # [N, k]

    # gate weights from the unbiased scores
    if score == "softmax":
        if pre_softmax:
            w = torch.gather(scores, 1, idx)
        else:
            w = torch.softmax(torch.gather(lg, 1, idx), dim=-1)
    else:
        s = torch.gather(scores, 1, idx)
        w = s / (s.sum(dim=-1, keepdim=True) + 1e-20) if k > 1 else s
    if scaling_factor:
        w = w * scaling_factor

    # capacity (sees the final gates, as fp32 like the C router)
    kept = torch.ones(N, k, dtype=torch.bool)
    capacity = -1
    dropped = 0
    if capacity_factor is not None and capacity_factor > 0:
        cf = float(torch.tensor(capacity_factor, dtype=torch.float32))
        capacity = int(math.ceil(N * k / E * cf - 1e-9))
        wf = w.detach().to(torch.float32)
        for e in range(E):
            slots = [(t, j) for t in range(N) for j in range(k) if int(idx[t, j]) == e]
            if len(slots) <= capacity:
                continue
            if drop_policy == "probs":
                slots.sort(key=lambda tj: (-float(wf[tj[0], tj[1]]), tj[0]))
            for t, j in slots[capacity:]:
                kept[t, j] = False
            dropped += len(slots) - capacity

    # balance losses: probabilities q over all experts, plain top-k routing map
    if score == "softmax":
        q = scores
    else:
        q = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    amap = torch.zeros(N, E, dtype=torch.float64).scatter(1, topk_stable(q.detach(), k), 1.0)
    if lb_type == "aux_loss":
        lb = E / (k * N * N) * (q.sum(0) * amap.sum(0)).sum()
    elif lb_type == "seq_aux_loss":
        b = seq_b
        S = N // b
        qs, ms = q.view(S, b, E), amap.view(S, b, E)
        per = [E / (k * S * S) * (qs[:, j].sum(0) * ms[:, j].sum(0)).sum() for j in range(b)]
        lb = torch.stack(per).mean()
    elif lb_type == "global_aux_loss":
        g = None
        if global_tokens_per_expert is not None:
            g = torch.as_tensor(global_tokens_per_expert, dtype=torch.float64)
            if g.sum() <= 0:
                g = None
        f = g / g.sum() if g is not None else amap.sum(0) / (N * k)
        lb = E * (f * q.mean(0)).sum()
    elif lb_type == "none":
        lb = torch.zeros((), dtype=torch.float64)
    else:
        raise ValueError(lb_type)
    z = (torch.logsumexp(lg, dim=-1) ** 2).mean()

    out = {
        "expert": idx.tolist(),
        "gate": w.detach().tolist(),
        "kept": kept.to(torch.int64).tolist(),
        "routed": torch.bincount(idx.reshape(-1), minlength=E).tolist(),
        "aux_routed": amap.sum(0).to(torch.int64).tolist(),
        "capacity": capacity,
        "dropped": dropped,
        "lb_loss": float(lb),
        "z_loss": float(z),
    }
    if dgate is not None:
        dg = torch.as_tensor(dgate, dtype=torch.float64).view(N, k)
        total = (dg * w).sum() + lb_scale * lb + z_scale * z
        total.backward()
        out["dlogits"] = lg.grad.tolist()
    return out
