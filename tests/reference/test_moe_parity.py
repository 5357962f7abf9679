"""Compare megatrain's MoE block (tests/tools/moe_dump) with the PyTorch
reference: output, gradients of the input, router and every expert tensor
(fp32 vs float64, 1e-5 relative to the tensor's max magnitude), the routing
(chosen experts and kept slots) and the auxiliary losses. Also checks the
hand-worked router case of the issue. usage: test_moe_parity.py DIR... | --hand"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from moe_reference import aux_losses, moe_forward, route  # noqa: E402


def hand_case():
    logits = torch.tensor([[2, 1, 0, -1], [.5, .3, .1, 0], [-1, 0, 1, 2], [.1, 3, 0, -.2]],
                          dtype=torch.float64)
    expert, kept, gates, probs, routed = route(logits, 2, None, "probs", False)
    lb, z = aux_losses(logits, probs, routed, 2)
    assert list(routed) == [3, 3, 1, 1], routed
    assert abs(lb.item() - 1.12712) < 1e-5, lb.item()
    assert abs(z.item() - 6.09994) < 1e-5, z.item()
    print("hand case: tokens per expert %s, load-balancing loss %.5f, z-loss %.5f"
          % (list(routed), lb.item(), z.item()))


def load(d, name, shape, dtype=np.float32):
    return np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype).reshape(shape)


def check(d):
    m = json.load(open(os.path.join(d, "meta.json")))
    N, h, Fh, E, k = m["N"], m["h"], m["F"], m["E"], m["k"]
    T = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)  # noqa: E731
    x, wr = T(load(d, "x", (N, h))), T(load(d, "router", (E, h)))
    ex = [[T(load(d, "e%d_%s" % (e, n), s)) for n, s in
           (("fc1_w", (Fh, h)), ("fc1_b", (Fh,)), ("fc2_w", (h, Fh)), ("fc2_b", (h,)))]
          for e in range(E)]
    cf = m["capacity_factor"] if m["capacity_factor"] > 0 else None
    out, lb, z, expert, kept, routed = moe_forward(x, wr, ex, k, cf, m["policy"], m["pre_softmax"])
    dy = torch.tensor(load(d, "dy", (N, h)), dtype=torch.float64)
    obj = (out * dy).sum() + m["aux_scale"] * (m["lb_coeff"] * lb + m["z_coeff"] * z)
    obj.backward()
    assert (load(d, "expert", (N, k), np.int32) == expert).all(), "chosen experts differ"
    assert (load(d, "kept", (N, k), np.int32).astype(bool) == kept).all(), "kept slots differ"
    worst = 0.0

    def cmp(name, mine, ref):
        nonlocal worst
        ref = ref.detach().numpy()
        scale = max(np.abs(ref).max(), 1e-30)
        r = np.abs(mine.reshape(ref.shape) - ref).max() / scale
        worst = max(worst, r)
        assert r < 1e-5, "%s: rel diff %.3e" % (name, r)

    cmp("out", load(d, "out", (N, h)), out)
    cmp("dx", load(d, "dx", (N, h)), x.grad)
    cmp("grad_router", load(d, "grad_router", (E, h)), wr.grad)
    for e in range(E):
        for i, n in enumerate(("fc1_w", "fc1_b", "fc2_w", "fc2_b")):
            g = ex[e][i].grad if ex[e][i].grad is not None else torch.zeros_like(ex[e][i])
            cmp("e%d_%s" % (e, n), load(d, "grad_e%d_%s" % (e, n), g.shape), g)
    assert abs(m["lb_loss"] - lb.item()) < 1e-6 * max(1, abs(lb.item())), (m["lb_loss"], lb.item())
    assert abs(m["z_loss"] - z.item()) < 1e-5 * max(1, abs(z.item())), (m["z_loss"], z.item())
    print("%s: k=%d cf=%s policy=%s pre_softmax=%d: %d of %d slots dropped; out, dx, router and "
          "expert grads agree (worst rel %.2e); lb %.6f z %.6f"
          % (os.path.basename(d), k, cf, m["policy"], m["pre_softmax"], int((~kept).sum()), N * k,
             worst, lb.item(), z.item()))


if __name__ == "__main__":
    for a in sys.argv[1:]:
        hand_case() if a == "--hand" else check(a)
